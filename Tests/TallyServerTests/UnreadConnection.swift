import Foundation

#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// A TCP connection that sends one request and does not read the answer until told to: a client that asks for a
/// large answer and leaves it unread. Its receive buffer is made as small as the kernel allows before it connects,
/// so the server's answer stops at the server's socket instead of filling this side's buffers.
final class UnreadConnection: @unchecked Sendable {
    private var socket: Int32

    /// Connects to 127.0.0.1:`port`.
    init(port: Int) throws {
        #if canImport(Glibc)
        socket = Glibc.socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        #else
        socket = Darwin.socket(AF_INET, SOCK_STREAM, 0)
        #endif
        guard socket >= 0 else { throw Failure("socket: errno \(errno)") }
        var size: Int32 = 2048
        setsockopt(socket, SOL_SOCKET, SO_RCVBUF, &size, socklen_t(MemoryLayout<Int32>.size))
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_port = in_port_t(UInt16(port).bigEndian)
        address.sin_addr.s_addr = inet_addr("127.0.0.1")
        let connected = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { connect(socket, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) }
        }
        guard connected == 0 else {
            close(socket)
            throw Failure("connect: errno \(errno)")
        }
    }

    deinit { if socket >= 0 { close(socket) } }

    /// Goes away with the answer unread: the kernel resets the connection, and the server's next write fails.
    func reset() {
        var linger = linger(l_onoff: 1, l_linger: 0)
        setsockopt(socket, SOL_SOCKET, SO_LINGER, &linger, socklen_t(MemoryLayout<linger>.size))
        close(socket)
        socket = -1
    }

    /// The port this side of the connection has.
    var localPort: Int {
        var address = sockaddr_in()
        var length = socklen_t(MemoryLayout<sockaddr_in>.size)
        _ = withUnsafeMutablePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { getsockname(socket, $0, &length) }
        }
        return Int(UInt16(bigEndian: address.sin_port))
    }

    /// The server's TCP connections on `port` (IPv4 loopback, from `/proc/net/tcp`): each one's client port,
    /// state (`01` established, `08` closed by the client only, …) and bytes waiting in its send queue.
    static func serverSockets(port: Int) throws -> [(clientPort: Int, state: String, unsent: Int)] {
        // Read to the end: /proc files report a size of 0, and a read by size stops after the first page.
        guard let file = FileHandle(forReadingAtPath: "/proc/net/tcp") else { throw Failure("no /proc/net/tcp") }
        defer { try? file.close() }
        let table = String(decoding: try file.readToEnd() ?? Data(), as: UTF8.self)
        let local = String(format: ":%04X", port)
        return table.split(separator: "\n").dropFirst().compactMap { line in
            let fields = line.split(separator: " ")
            guard fields.count > 4, fields[1].hasSuffix(local), let remote = fields[2].split(separator: ":").last,
                let clientPort = Int(remote, radix: 16), let queue = fields[4].split(separator: ":").first,
                let unsent = Int(queue, radix: 16)
            else { return nil }
            return (clientPort, String(fields[3]), unsent)
        }
    }

    /// Waits (at most `limit`) until the server's sockets to each of `clients` hold unsent bytes that no longer
    /// go down (the kernel's buffers are full and the server's writes to them wait); whether they did.
    static func waitUntilStalled(_ clients: [UnreadConnection], serverPort: Int, within limit: Duration) async throws -> Bool {
        let ports = Set(clients.map(\.localPort))
        let start = ContinuousClock.now
        var last: [Int: Int] = [:]
        while ContinuousClock.now - start < limit {
            let queued = Dictionary(try serverSockets(port: serverPort).filter { ports.contains($0.clientPort) && $0.unsent > 0 }
                .map { ($0.clientPort, $0.unsent) }, uniquingKeysWith: max)
            if queued.count == ports.count, queued == last { return true }
            last = queued
            try await Task.sleep(for: .milliseconds(300))
        }
        return false
    }

    /// Sends `text` whole.
    func send(_ text: String) throws {
        var bytes = Array(text.utf8)[...]
        while !bytes.isEmpty {
            let sent = bytes.withUnsafeBytes { write(socket, $0.baseAddress, $0.count) }
            guard sent > 0 else { throw Failure("send: errno \(errno)") }
            bytes = bytes.dropFirst(sent)
        }
    }

    /// Reads everything until the server's end of the stream (or a reset), for at most `limit`; what came, and
    /// whether the stream ended (false: still open at the limit).
    func readToEnd(within limit: Duration) async -> (bytes: [UInt8], ended: Bool) {
        let deadline = ContinuousClock.now + limit
        var received: [UInt8] = []
        var buffer = [UInt8](repeating: 0, count: 65_536)
        while ContinuousClock.now < deadline {
            let count = buffer.withUnsafeMutableBytes { recv(socket, $0.baseAddress, $0.count, Int32(MSG_DONTWAIT)) }
            if count > 0 {
                received += buffer[..<count]
            } else if count == 0 || (errno != EAGAIN && errno != EWOULDBLOCK) {
                return (received, true)
            } else {
                try? await Task.sleep(for: .milliseconds(5))
            }
        }
        return (received, false)
    }

    struct Failure: Error, CustomStringConvertible {
        let description: String
        init(_ description: String) { self.description = description }
    }
}

/// What an HTTP/1.1 answer read whole or in part holds: its status, its head's fields, how many body bytes came and
/// how many its `Content-Length` promised.
struct ReceivedAnswer {
    let status: Int
    let head: String
    let bodyBytes: Int
    let contentLength: Int

    init?(_ bytes: [UInt8]) {
        let separator = Array("\r\n\r\n".utf8)
        guard bytes.count >= 4, let end = (0...(bytes.count - 4)).first(where: { bytes[$0..<$0 + 4].elementsEqual(separator) }) else {
            return nil
        }
        head = String(decoding: bytes[..<end], as: UTF8.self)
        guard let status = head.split(separator: " ").dropFirst().first.flatMap({ Int($0) }) else { return nil }
        self.status = status
        bodyBytes = bytes.count - end - 4
        contentLength = head.lowercased().split(separator: "\r\n").first { $0.hasPrefix("content-length:") }
            .flatMap { Int($0.dropFirst("content-length:".count).trimmingCharacters(in: .whitespaces)) } ?? -1
    }

    /// Whether the whole body came.
    var complete: Bool { bodyBytes >= contentLength }

    /// The value of a header field (case-insensitive name).
    func field(_ name: String) -> String? {
        head.split(separator: "\r\n").dropFirst().first { $0.lowercased().hasPrefix(name.lowercased() + ":") }
            .map { String($0.dropFirst(name.count + 1)).trimmingCharacters(in: .whitespaces) }
    }
}
