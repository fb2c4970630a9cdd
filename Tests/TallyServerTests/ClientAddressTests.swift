import Foundation
import NIOCore
import Testing

@testable import TallyServer

/// Client addresses: parsing, IPv6 /64 buckets, CIDRs, and `X-Forwarded-For` through trusted proxies only.
@Suite("Client address", .timeLimit(.minutes(1)))
struct ClientAddressTests {
    let proxies = ["10.0.0.0/8", "fd00::/8"].compactMap { IPNetwork(cidr: $0) }

    func ip(_ text: String) -> ClientIP { ClientIP(text)! }

    @Test("Address literals parse; IPv4-mapped IPv6 is IPv4; IPv6 is limited per /64")
    func parsing() throws {
        #expect(ip("203.0.113.7").limitKey == "203.0.113.7")
        #expect(ip("::ffff:203.0.113.7") == ip("203.0.113.7"))
        #expect(ip("2001:db8:1:2:aaaa::1").limitKey == ip("2001:db8:1:2:ffff:ffff:ffff:ffff").limitKey)
        #expect(ip("2001:db8:1:2::1").limitKey != ip("2001:db8:1:3::1").limitKey)
        #expect(ip("2001:db8:1:2::1").limitKey == "v6:20010db800010002::/64")
        for bad in ["", "1.2.3", "1.2.3.4:80", "[::1]", "fe80::1%eth0", "example.com", "1.2.3.256", " 1.2.3.4"] {
            #expect(ClientIP(bad) == nil, "\(bad) parsed")
        }
        let v4 = try SocketAddress(ipAddress: "198.51.100.9", port: 443)
        let mapped = try SocketAddress(ipAddress: "::ffff:198.51.100.9", port: 443)
        #expect(ClientIP(v4) == ip("198.51.100.9") && ClientIP(mapped) == ip("198.51.100.9"))
    }

    @Test("CIDRs: IPv4, IPv6, single hosts, IPv4-mapped; malformed ones are refused")
    func networks() {
        let net = IPNetwork(cidr: "10.0.0.0/8")!
        #expect(net.contains(ip("10.255.1.2")) && !net.contains(ip("11.0.0.1")) && !net.contains(ip("::ffff:11.0.0.1")))
        #expect(net.contains(ip("::ffff:10.1.1.1")))
        let v6 = IPNetwork(cidr: "2001:db8::/32")!
        #expect(v6.contains(ip("2001:db8:ffff::1")) && !v6.contains(ip("2001:db9::1")))
        let host = IPNetwork(cidr: "192.0.2.1")!
        #expect(host.contains(ip("192.0.2.1")) && !host.contains(ip("192.0.2.2")))
        #expect(IPNetwork(cidr: "::ffff:10.0.0.0/104")!.contains(ip("10.2.3.4")))
        #expect(IPNetwork(cidr: "0.0.0.0/0")!.contains(ip("8.8.8.8")))
        #expect(IPNetwork(cidr: "2001:db8::1/128")!.contains(ip("2001:db8::1")))
        #expect(!IPNetwork(cidr: "2001:db8::1/128")!.contains(ip("2001:db8::2")))
        #expect(IPNetwork(cidr: "2001:db8::/80")!.contains(ip("2001:db8::ffff:1")))
        #expect(!IPNetwork(cidr: "2001:db8::/80")!.contains(ip("2001:db8:0:0:1::1")))
        for bad in ["10.0.0.0/33", "10.0.0.0/-1", "::/129", "10.0.0.0/8/8", "ten/8", "10.0.0.0/", "::ffff:10.0.0.0/95"] {
            #expect(IPNetwork(cidr: bad) == nil, "\(bad) parsed")
        }
    }

    @Test("X-Forwarded-For is read only from a trusted peer, right to left, skipping trusted hops")
    func forwardedFor() {
        let client = ip("203.0.113.7")
        let proxy = ip("10.0.0.2")
        // An untrusted peer's header is ignored: anyone could send it.
        #expect(ClientAddress.resolve(peer: client, forwardedFor: ["198.51.100.1"], trusted: proxies) == client)
        // No trusted proxies configured: the peer, always.
        #expect(ClientAddress.resolve(peer: proxy, forwardedFor: ["198.51.100.1"], trusted: []) == proxy)
        // One proxy: the address it appended.
        #expect(ClientAddress.resolve(peer: proxy, forwardedFor: ["203.0.113.7"], trusted: proxies) == client)
        // What the client wrote itself (left) is never read; trusted hops (right) are skipped.
        #expect(
            ClientAddress.resolve(peer: proxy, forwardedFor: ["6.6.6.6, 203.0.113.7, 10.0.0.9"], trusted: proxies) == client)
        #expect(
            ClientAddress.resolve(peer: proxy, forwardedFor: ["6.6.6.6", "203.0.113.7 ,fd00::5"], trusted: proxies) == client,
            "several header lines are one list")
        // Garbage left of the client's address is not looked at.
        #expect(ClientAddress.resolve(peer: proxy, forwardedFor: ["not-an-ip, 203.0.113.7"], trusted: proxies) == client)
        // Malformed where it is read: the peer.
        #expect(ClientAddress.resolve(peer: proxy, forwardedFor: ["203.0.113.7:5555"], trusted: proxies) == proxy)
        #expect(ClientAddress.resolve(peer: proxy, forwardedFor: ["203.0.113.7, "], trusted: proxies) == proxy)
        #expect(ClientAddress.resolve(peer: proxy, forwardedFor: [""], trusted: proxies) == proxy)
        // Every hop a trusted proxy: the left-most.
        #expect(ClientAddress.resolve(peer: proxy, forwardedFor: ["10.0.0.7, 10.0.0.8"], trusted: proxies) == ip("10.0.0.7"))
        // No header: the peer.
        #expect(ClientAddress.resolve(peer: proxy, forwardedFor: [], trusted: proxies) == proxy)
        // IPv6 clients through an IPv6 proxy, and a mapped peer.
        #expect(ClientAddress.resolve(peer: ip("fd00::1"), forwardedFor: ["2001:db8::7"], trusted: proxies) == ip("2001:db8::7"))
        #expect(ClientAddress.resolve(peer: ip("::ffff:10.0.0.2"), forwardedFor: ["203.0.113.7"], trusted: proxies) == client)
        // Too many hops: the peer.
        let long = Array(repeating: "10.0.0.1", count: ClientAddress.maxHops + 1).joined(separator: ",")
        #expect(ClientAddress.resolve(peer: proxy, forwardedFor: [long], trusted: proxies) == proxy)
    }
}
