#if canImport(SwiftUI)
import SwiftUI

/// The oracle's screen on iOS: the wallet, a reading button, the chat history and a field to ask.
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
            Button("Draw today's reading") { Task { reading = try? await session.drawReading() } }
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
