#if canImport(Observation)
import Observation

/// A range of a synced collection for SwiftUI: `@Observable` (iOS 17 and later), updated on the main actor when
/// the documents change (a local write at once; pulls and rollbacks as they land).
///
/// ```swift
/// struct MonthView: View {
///     @State private var logs: ObservedDocuments<HabitLog>
///
///     init(client: Client) {
///         let collection = client.collection("habit_logs", of: HabitLog.self)
///         _logs = State(initialValue: ObservedDocuments(collection, from: "2026-11-01", to: "2026-12-01"))
///     }
///
///     var body: some View {
///         List(logs.documents, id: \.id) { Text($0.value.habit) }.task { await logs.run() }
///     }
/// }
/// ```
@available(iOS 17, macOS 14, tvOS 17, watchOS 10, *)
@MainActor
@Observable
public final class ObservedDocuments<Value: Codable & Sendable> {
    /// The documents of the range now; read from the device at init, for first paint.
    public private(set) var documents: [SyncedDocument<Value>]
    @ObservationIgnored private let collection: SyncedCollection<Value>
    @ObservationIgnored private let range: (from: String?, to: String?, descending: Bool)

    /// Reads the range from the device at once; call ``run()`` (from SwiftUI's `.task`) to follow changes.
    public init(_ collection: SyncedCollection<Value>, from: String? = nil, to: String? = nil, descending: Bool = false) {
        self.collection = collection
        range = (from, to, descending)
        documents = (try? collection.documents(from: from, to: to, descending: descending)) ?? []
    }

    /// Follows the range until the calling task is cancelled (SwiftUI cancels `.task` when the view goes away).
    public func run() async {
        for await next in collection.observe(from: range.from, to: range.to, descending: range.descending) {
            documents = next
        }
    }
}
#endif
