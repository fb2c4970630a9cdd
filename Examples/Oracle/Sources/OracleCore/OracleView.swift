#if canImport(SwiftUI) && canImport(StoreKit)
import PhotosUI
import StoreKit
import SwiftUI

/// The oracle's screen on iOS: the wallet and premium, a reading button, a face reading from a photo (its price shown
/// before asking), what the App Store sells (loaded from it, with its prices) and "Restore Purchases", the chat history
/// and a field to ask. What goes wrong with a tap is shown in an alert (``OracleSession/failure``), never dropped.
///
/// The app makes the session's client with `OracleSetup.client(server:)` (the session in the Keychain) and starts the
/// session (``OracleSession/start()``); the screen starts the StoreKit transaction observer as it appears — this is
/// the app's first screen, so at launch — loads the products and follows the server, and tells the client when the app
/// goes to the background and comes back (`scenePhase`).
public struct OracleView: View {
    @State private var session: OracleSession
    @State private var products: [Product] = []
    @State private var question = ""
    @State private var reading: String?
    @State private var pickedPhoto: PhotosPickerItem?
    @State private var faceReading: PictureQuestion?
    @Environment(\.scenePhase) private var scenePhase

    /// The screen of `session`.
    public init(session: OracleSession) {
        _session = State(initialValue: session)
    }

    public var body: some View {
        VStack {
            Text(session.wallet.map { "\($0.available) tokens" } ?? "…")
            if session.isPremium { Text("Premium: unlimited readings") }
            if let notice = session.notice { Text(notice).foregroundStyle(.red) }
            Button("Draw today's reading") { session.attempt { reading = try await session.drawReading() } }
            if let reading { Text(reading) }
            HStack {
                ForEach(products) { product in
                    if product.id != OracleProduct.premium || !session.isPremium {
                        Button("\(product.displayName): \(product.displayPrice)") { session.attempt { try await session.buy(product) } }
                    }
                }
            }
            Button("Restore Purchases") { session.attempt { try await session.restorePurchases() } }
            // `.compatible` hands a HEIC photo over as JPEG, which the gateway takes; its price depends on its pixel size.
            PhotosPicker("Choose a photo of your face", selection: $pickedPhoto, matching: .images, preferredItemEncoding: .compatible)
                .onChange(of: pickedPhoto) { _, item in
                    guard let item else { return }
                    session.attempt {
                        guard let photo = try await item.loadTransferable(type: Data.self) else {
                            session.failure = "This photo cannot be read: choose another one."
                            return
                        }
                        faceReading = .faceReading(photo: photo)
                        try await session.price(.faceReading(photo: photo))
                    }
                }
            if let faceReading {
                Button("Read my face: up to \(session.pictureCost ?? 0) tokens") { session.attempt { _ = try await session.answer(faceReading) } }
                    .disabled(!session.canAskAboutPicture)
            }
            if let answer = session.pictureAnswer { Text(answer) }
            List(session.history, id: \.sentAt) { exchange in
                VStack(alignment: .leading) {
                    Text(exchange.question).bold()
                    Text(exchange.answer)
                }
            }
            TextField("Ask the oracle", text: $question).onSubmit {
                do {
                    try session.ask(question)
                    question = ""
                } catch {
                    session.report(error)
                }
            }
        }
        .alert(Text("Something went wrong"), isPresented: $session.isShowingFailure) {
            Button("OK") {}
        } message: {
            Text(session.failure ?? "")
        }
        .task {
            // From launch: purchases a crash left unfinished, Ask to Buy approvals, renewals (ended with the screen).
            let transactions = session.observeTransactions()
            defer { transactions.cancel() }
            await session.attempt { products = try await session.loadProducts() }.value
            await session.follow()
        }
        // In the background the event stream closes (no connection held for a suspended app); back in front it reopens
        // and catches up, and what waited in the outbox is pushed.
        .onChange(of: scenePhase) { _, phase in
            switch phase {
            case .active: session.client.appDidBecomeActive()
            case .background: session.client.appDidEnterBackground()
            default: break  // .inactive: the app switcher, a system alert; still in front
            }
        }
    }
}
#endif
