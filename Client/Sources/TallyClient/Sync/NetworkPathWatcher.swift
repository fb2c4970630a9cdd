import Foundation

#if canImport(Network)
import Network

/// Calls `onUsable` whenever the device's network path is usable after an update (Wi-Fi joined, cellular back,
/// a VPN up): a sign that a server unreachable a moment ago may answer now. Watches from init to deinit;
/// Apple platforms only (`NWPathMonitor`, iOS 12). Kept thin: it only signals, the sync engine decides.
final class NetworkPathWatcher: @unchecked Sendable {
    // NWPathMonitor is thread-safe; the handler and the queue are set once, before `start`.
    private let monitor = NWPathMonitor()

    /// Starts watching on a queue of its own.
    init(onUsable: @escaping @Sendable () -> Void) {
        monitor.pathUpdateHandler = { path in
            if path.status == .satisfied { onUsable() }
        }
        monitor.start(queue: DispatchQueue(label: "tally.network-path"))
    }

    deinit { monitor.cancel() }
}
#else
/// Elsewhere (Linux) there is no path monitor: the next answered request is the sign that the server is back.
final class NetworkPathWatcher: Sendable {
    /// Watches nothing.
    init(onUsable: @escaping @Sendable () -> Void) {}
}
#endif
