#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#elseif canImport(Darwin)
import Darwin
#endif

/// The process's open-file limit (`RLIMIT_NOFILE`): every connection, database connection and file
/// holds a descriptor, so the public listener's default connection cap is derived from it.
public enum OpenFileLimit {
    /// The soft limit in force (what `accept` and `open` run into).
    public static var current: Int {
        var limit = rlimit()
        guard getrlimit(resourceID, &limit) == 0 else { return 1024 }
        return clamp(limit.rlim_cur)
    }

    /// Raises the soft limit to the hard limit where the system allows it; returns the soft limit
    /// before and after (equal when it could not be raised, or already was at the hard limit).
    @discardableResult
    public static func raiseToHardLimit() -> (before: Int, after: Int) {
        var limit = rlimit()
        guard getrlimit(resourceID, &limit) == 0 else { return (current, current) }
        let before = clamp(limit.rlim_cur)
        guard limit.rlim_cur < limit.rlim_max else { return (before, before) }
        var raised = limit
        raised.rlim_cur = limit.rlim_max
        #if canImport(Darwin)
        // macOS refuses more than OPEN_MAX for RLIMIT_NOFILE, whatever the hard limit says.
        raised.rlim_cur = min(raised.rlim_cur, rlim_t(OPEN_MAX))
        #endif
        _ = setrlimit(resourceID, &raised)
        return (before, current)
    }

    #if canImport(Glibc)
    private static let resourceID = __rlimit_resource_t(RLIMIT_NOFILE.rawValue)
    #else
    private static let resourceID = RLIMIT_NOFILE
    #endif

    /// A limit as a count (`RLIM_INFINITY` and other huge values as `Int.max / 2`, leaving room for arithmetic).
    private static func clamp(_ value: rlim_t) -> Int {
        value >= rlim_t(Int.max / 2) ? Int.max / 2 : Int(value)
    }
}
