import Foundation
import NIOCore

#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// A client's IP address as 128 bits; IPv4 (and IPv4-mapped IPv6, `::ffff:a.b.c.d`) is kept as IPv4.
struct ClientIP: Hashable, Sendable {
    /// Whether the address is IPv4 (in the low 32 bits of ``low``) or IPv6.
    let isIPv4: Bool
    /// The upper 64 bits (0 for IPv4).
    let high: UInt64
    /// The lower 64 bits.
    let low: UInt64

    /// An IPv4 address.
    init(ipv4: UInt32) {
        (isIPv4, high, low) = (true, 0, UInt64(ipv4))
    }

    /// An IPv6 address; IPv4-mapped ones become IPv4.
    init(ipv6 high: UInt64, _ low: UInt64) {
        if high == 0, low >> 32 == 0xFFFF {
            (isIPv4, self.high, self.low) = (true, 0, low & 0xFFFF_FFFF)
        } else {
            (isIPv4, self.high, self.low) = (false, high, low)
        }
    }

    /// Parses an address literal (`203.0.113.7`, `2001:db8::1`); `nil` for anything else (ports, zones, names).
    init?(_ text: some StringProtocol) {
        let text = String(text)
        var v4 = in_addr()
        if inet_pton(AF_INET, text, &v4) == 1 {
            self.init(ipv4: UInt32(bigEndian: v4.s_addr))
            return
        }
        var v6 = in6_addr()
        guard inet_pton(AF_INET6, text, &v6) == 1 else { return nil }
        self.init(ipv6Bytes: v6)
    }

    /// The address of a TCP peer; `nil` for a Unix socket.
    init?(_ address: SocketAddress) {
        switch address {
        case .v4(let v4): self.init(ipv4: UInt32(bigEndian: v4.address.sin_addr.s_addr))
        case .v6(let v6): self.init(ipv6Bytes: v6.address.sin6_addr)
        case .unixDomainSocket: return nil
        }
    }

    private init(ipv6Bytes address: in6_addr) {
        let bytes = withUnsafeBytes(of: address) { Array($0) }
        self.init(
            ipv6: bytes[0..<8].reduce(0) { $0 << 8 | UInt64($1) }, bytes[8..<16].reduce(0) { $0 << 8 | UInt64($1) })
    }

    /// What rate limits count under: the IPv4 address, or the IPv6 /64 (one subscriber's network, which
    /// hands its devices any of 2^64 addresses).
    var limitKey: String {
        if isIPv4 {
            return "\(low >> 24 & 0xFF).\(low >> 16 & 0xFF).\(low >> 8 & 0xFF).\(low & 0xFF)"
        }
        return "v6:" + String(high, radix: 16) + "::/64"
    }
}

/// An IP network in CIDR notation (`10.0.0.0/8`, `fd00::/8`; a bare address is a single host).
public struct IPNetwork: Sendable, Hashable, CustomStringConvertible {
    private let base: ClientIP
    private let prefix: Int

    /// Parses `address/prefix`; `nil` when malformed or the prefix is out of range.
    public init?(cidr: String) {
        let parts = cidr.trimmingCharacters(in: .whitespaces).split(separator: "/", omittingEmptySubsequences: false)
        guard (1...2).contains(parts.count), let address = ClientIP(parts[0]) else { return nil }
        let width = parts[0].contains(":") ? 128 : 32
        guard let prefix = parts.count == 2 ? Int(parts[1]) : width, (0...width).contains(prefix) else { return nil }
        // An IPv4-mapped network (`::ffff:10.0.0.0/104`) is the IPv4 network it maps.
        let mappedPrefix = address.isIPv4 && parts[0].contains(":") ? prefix - 96 : prefix
        guard mappedPrefix >= 0 else { return nil }
        self.base = address
        self.prefix = mappedPrefix
        self.description = cidr
    }

    /// The text it was parsed from.
    public let description: String

    /// Whether `ip` is inside the network.
    func contains(_ ip: ClientIP) -> Bool {
        guard ip.isIPv4 == base.isIPv4 else { return false }
        if ip.isIPv4 { return Self.matches(ip.low, base.low, bits: prefix, width: 32) }
        return Self.matches(ip.high, base.high, bits: min(prefix, 64), width: 64)
            && Self.matches(ip.low, base.low, bits: max(prefix - 64, 0), width: 64)
    }

    /// Whether the top `bits` of two `width`-bit values (in the low bits of a `UInt64`) agree.
    private static func matches(_ a: UInt64, _ b: UInt64, bits: Int, width: Int) -> Bool {
        guard bits > 0 else { return true }
        let shift = UInt64(width - bits)
        return a >> shift == b >> shift
    }
}

/// The client address of a request: the TCP peer, unless the peer is a trusted proxy, which reports the
/// address it received the connection from in `X-Forwarded-For`.
enum ClientAddress {
    /// Hops of `X-Forwarded-For` examined at most before the peer is used instead.
    static let maxHops = 16

    /// When `peer` is inside `trusted`, the right-most `X-Forwarded-For` address that is not itself a
    /// trusted proxy (each proxy appends the address it saw; everything left of that is whatever the client
    /// sent, so it is never read); when every hop is trusted, the left-most. A malformed hop on the way
    /// (or more than ``maxHops``) falls back to the peer. An untrusted peer's header is ignored.
    static func resolve(peer: ClientIP?, forwardedFor: [String], trusted: [IPNetwork]) -> ClientIP? {
        guard let peer, trusted.contains(where: { $0.contains(peer) }) else { return peer }
        var client = peer
        var hops = 0
        for value in forwardedFor.reversed() {
            for hop in value.split(separator: ",", omittingEmptySubsequences: false).reversed() {
                hops += 1
                guard hops <= maxHops, let address = ClientIP(hop.trimmingCharacters(in: .whitespaces)) else { return peer }
                if !trusted.contains(where: { $0.contains(address) }) { return address }
                client = address
            }
        }
        return client
    }
}
