#if canImport(SwiftUI)
import SwiftUI

/// The oracle's screen on iOS: the wallet and premium, a reading button, the store's two products, the chat history
/// and a field to ask.
public struct OracleView: View {
    @State private var session: OracleSession
    @State private var question = ""
    @State private var reading: String?

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
