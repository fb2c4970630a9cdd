#if canImport(SwiftUI)
import PhotosUI
import SwiftUI

/// The oracle's screen on iOS: the wallet and premium, a reading button, a face reading from a photo (its price shown
/// before asking), the store's two products, the chat history and a field to ask.
public struct OracleView: View {
    @State private var session: OracleSession
    @State private var question = ""
    @State private var reading: String?
    @State private var pickedPhoto: PhotosPickerItem?
    @State private var faceReading: PictureQuestion?

    /// The screen of `session`.
    public init(session: OracleSession) {
        _session = State(initialValue: session)
    }

    public var body: some View {
        VStack {
            Text(session.wallet.map { "\($0.available) tokens" } ?? "…")
            if session.isPremium { Text("Premium: unlimited readings") }
            Button("Draw today's reading") { Task { reading = try? await session.drawReading() } }
            HStack {
                Button("Buy 100 tokens") { Task { try? await session.buyTokens() } }
                if !session.isPremium { Button("Go premium") { Task { try? await session.subscribe() } } }
            }
            if let reading { Text(reading) }
            // `.compatible` hands a HEIC photo over as JPEG, which the gateway takes; its price depends on its pixel size.
            PhotosPicker("Choose a photo of your face", selection: $pickedPhoto, matching: .images, preferredItemEncoding: .compatible)
                .onChange(of: pickedPhoto) { _, item in
                    Task {
                        guard let photo = try? await item?.loadTransferable(type: Data.self) else { return }
                        faceReading = .faceReading(photo: photo)
                        try? await session.price(.faceReading(photo: photo))
                    }
                }
            if let faceReading {
                Button("Read my face: up to \(session.pictureCost ?? 0) tokens") { Task { try? await session.answer(faceReading) } }
                    .disabled(!session.canAskAboutPicture)
            }
            if let answer = session.pictureAnswer { Text(answer) }
            if let notice = session.notice { Text(notice).foregroundStyle(.red) }
            List(session.history, id: \.sentAt) { exchange in
                VStack(alignment: .leading) {
                    Text(exchange.question).bold()
                    Text(exchange.answer)
                }
            }
            TextField("Ask the oracle", text: $question).onSubmit {
                try? session.ask(question)
                question = ""
            }
        }
        .task { await session.follow() }
    }
}
#endif
