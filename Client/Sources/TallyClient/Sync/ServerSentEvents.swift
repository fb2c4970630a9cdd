import Foundation

/// One server-sent event as a client reads it.
public struct ServerSentEvent: Sendable, Hashable {
    /// The `event:` field (`message` when absent).
    public var name: String
    /// The `data:` lines, joined with newlines.
    public var data: String
    /// The stream's last event id when this event was dispatched: set by an `id:` field of this event or of an
    /// earlier one (an id persists until changed), empty when none was ever set. What `Last-Event-ID` resumes from.
    public var lastEventId: String

    /// Creates an event.
    public init(name: String, data: String, lastEventId: String = "") {
        self.name = name
        self.data = data
        self.lastEventId = lastEventId
    }
}

/// Splits a `text/event-stream` body into events, fed bytes in whatever pieces the network delivers. Follows
/// the WHATWG rules ("Server-sent events", interpreting an event stream): lines end with CR, LF or CRLF;
/// `event:`, `data:`, `id:` and `retry:` fields; comments and unknown fields ignored; a blank line dispatches
/// an event that has data.
public struct EventStreamParser: Sendable {
    private var line: [UInt8] = []
    private var afterCR = false
    private var name = ""
    private var data: [String] = []
    private var eventIdBuffer = ""

    /// The last event id as of the latest dispatched event (empty when none): send it as `Last-Event-ID` when
    /// reconnecting. An `id:` of an event cut off before its blank line does not count.
    public private(set) var lastEventId = ""
    /// The reconnection delay the server asked for with its latest valid `retry:` field, in seconds.
    public private(set) var reconnectionDelay: TimeInterval?

    /// A parser at the start of a stream; `lastEventId` carries the id of an earlier connection over.
    public init(lastEventId: String = "") {
        self.lastEventId = lastEventId
        eventIdBuffer = lastEventId
    }

    /// The events completed by `bytes`.
    public mutating func feed(_ bytes: some Sequence<UInt8>) -> [ServerSentEvent] {
        var events: [ServerSentEvent] = []
        for byte in bytes {
            switch byte {
            case UInt8(ascii: "\n") where afterCR:
                afterCR = false  // the LF of a CRLF: the line already ended
            case UInt8(ascii: "\n"), UInt8(ascii: "\r"):
                afterCR = byte == UInt8(ascii: "\r")
                if let event = endLine() { events.append(event) }
            default:
                afterCR = false
                line.append(byte)
            }
        }
        return events
    }

    private mutating func endLine() -> ServerSentEvent? {
        defer { line.removeAll(keepingCapacity: true) }
        if line.isEmpty { return dispatch() }
        if line.first == UInt8(ascii: ":") { return nil }
        let text = String(decoding: line, as: UTF8.self)
        let field: Substring
        var value: Substring
        if let colon = text.firstIndex(of: ":") {
            field = text[..<colon]
            value = text[text.index(after: colon)...]
            if value.first == " " { value = value.dropFirst() }
        } else {
            (field, value) = (Substring(text), "")
        }
        switch field {
        case "event": name = String(value)
        case "data": data.append(String(value))
        case "id" where !value.contains("\0"): eventIdBuffer = String(value)
        case "retry":
            if !value.isEmpty, value.utf8.allSatisfy({ (UInt8(ascii: "0")...UInt8(ascii: "9")).contains($0) }), let millis = Int(value) {
                reconnectionDelay = TimeInterval(millis) / 1000
            }
        default: break
        }
        return nil
    }

    /// A blank line: the buffered event, if it has data. The last event id is taken either way.
    private mutating func dispatch() -> ServerSentEvent? {
        lastEventId = eventIdBuffer
        defer { (name, data) = ("", []) }
        guard !data.isEmpty else { return nil }
        return ServerSentEvent(name: name.isEmpty ? "message" : name, data: data.joined(separator: "\n"), lastEventId: lastEventId)
    }
}
