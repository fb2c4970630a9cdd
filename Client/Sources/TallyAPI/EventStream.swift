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

    /// The event `event` as text (its data decoded as UTF-8, an invalid sequence replaced, as the standard says).
    public init(_ event: EventStreamParser.Event) {
        self.init(name: event.type, data: String(decoding: event.data, as: UTF8.self), lastEventId: event.lastEventId)
    }
}

/// Splits a `text/event-stream` body into events, fed bytes in whatever pieces the network delivers: the one
/// parser of the server's AI relay (the provider's stream), the SDK (the sync event stream, AI streams) and the tests.
///
/// Follows the WHATWG rules ("Server-sent events", interpreting an event stream): a UTF-8 byte order mark at the
/// stream's start is skipped; lines end with CR, LF or CRLF (a CRLF split between two pieces is one line end);
/// `event`, `data` (its lines joined with LF), `id` (persisting; one holding NUL is ignored) and `retry` (ASCII
/// digits only) fields; a line starting with a colon is a comment; unknown fields are ignored; a blank line
/// dispatches the event when it has data; an event cut off by the end of the stream is dropped.
///
/// Bounded: the line being read and the data of the event being read take at most ``limit`` bytes together
/// (``bufferedBytes``), however the stream misbehaves (one endless line, endless `data:` lines); an `event` or `id`
/// value is one line, so at most as long. Beyond it ``feed(_:_:)`` throws ``TooLarge`` and the stream must end.
/// Steady state allocates nothing: a line within one piece is read in place, the buffers keep their capacity.
public struct EventStreamParser: Sendable {
    /// One dispatched event, its data as the stream's bytes.
    public struct Event: Sendable, Hashable {
        /// The `event` field (`message` when absent or empty).
        public var type: String
        /// The values of the event's `data` lines joined with LF, as sent (not checked as UTF-8).
        public var data: [UInt8]
        /// How many `data` lines made it (more than one: ``data`` holds LFs).
        public var dataLines: Int
        /// The `id` field among this event's own lines, if any: what the server wrote for this event
        /// (``lastEventId`` is what persists).
        public var id: String?
        /// The stream's last event id as this event is dispatched (empty when none was ever set).
        public var lastEventId: String

        /// Creates an event (a test's expected value).
        public init(type: String = "message", data: [UInt8], dataLines: Int = 1, id: String? = nil, lastEventId: String = "") {
            self.type = type
            self.data = data
            self.dataLines = dataLines
            self.id = id
            self.lastEventId = lastEventId
        }
    }

    /// What a stream says, in order.
    public enum Item: Sendable, Hashable {
        /// A dispatched event.
        case event(Event)
        /// A comment line's text after its colon (one leading space removed): a heartbeat, a provider's keep-alive.
        case comment(String)
        /// A valid `retry` field: the reconnection delay the server asks for, in milliseconds.
        case retry(Int)
    }

    /// A line or an event's data longer than the parser's ``limit``: the stream must end (the parser refuses every later piece).
    public struct TooLarge: Error, Sendable, Hashable, CustomStringConvertible {
        /// The limit that was passed, in bytes.
        public let limit: Int
        /// The error of a parser whose limit is `limit`.
        public init(limit: Int) { self.limit = limit }
        /// Says what happened, with the limit.
        public var description: String { "a line or an event of the stream is longer than \(limit) bytes" }
    }

    /// The default ``limit``: 1 MiB.
    public static let defaultLimit = 1 << 20
    /// Buffers grown beyond this by a large event are let go once it ends (the ones below keep their capacity).
    static let keptCapacity = 64 << 10

    /// The most bytes the line being read and the event's data may take together (see the type's summary).
    public let limit: Int
    /// The last event id as of the latest dispatched event (empty when none): send it as `Last-Event-ID` when
    /// reconnecting. An `id:` of an event cut off before its blank line does not count.
    public private(set) var lastEventId: String
    /// The reconnection delay the server asked for with its latest valid `retry:` field, in seconds.
    public private(set) var reconnectionDelay: TimeInterval?

    /// The bytes held now: the event's data so far and the line not yet ended. Never above ``limit``.
    public var bufferedBytes: Int { data.count + line.count }

    private var line: [UInt8] = []
    private var afterCR = false
    private var bomChecked = false
    private var bomMatched = 0
    private var type: String?
    private var data: [UInt8] = []
    private var dataLines = 0
    private var id: String?
    private var idBuffer: String
    private var refused = false

    /// A parser at the start of a stream; `lastEventId` carries the id of an earlier connection over.
    public init(lastEventId: String = "", limit: Int = EventStreamParser.defaultLimit) {
        self.lastEventId = lastEventId
        self.idBuffer = lastEventId
        self.limit = limit
    }

    /// Hands `visit` everything `bytes` completes, in order. An event's ``Event/data`` is the parser's own buffer,
    /// lent (copied only if kept). Throws ``TooLarge`` when a line or an event's data passes ``limit``; the items before it were handed.
    public mutating func feed(_ bytes: some Sequence<UInt8>, _ visit: (Item) -> Void) throws(TooLarge) {
        let failure = bytes.withContiguousStorageIfAvailable { scan($0, visit) }
            ?? Array(bytes).withUnsafeBufferPointer { scan($0, visit) }
        if let failure { throw failure }
    }

    /// The events completed by `bytes`, as text. Throws ``TooLarge`` when a line or an event's data passes ``limit``.
    public mutating func feed(_ bytes: some Sequence<UInt8>) throws(TooLarge) -> [ServerSentEvent] {
        var events: [ServerSentEvent] = []
        try feed(bytes) { item in
            if case .event(let event) = item { events.append(ServerSentEvent(event)) }
        }
        return events
    }

    private static let lf = UInt8(ascii: "\n")
    private static let cr = UInt8(ascii: "\r")
    private static let colon = UInt8(ascii: ":")
    private static let space = UInt8(ascii: " ")
    private static let bom: [UInt8] = [0xEF, 0xBB, 0xBF]

    private mutating func scan(_ input: UnsafeBufferPointer<UInt8>, _ visit: (Item) -> Void) -> TooLarge? {
        if refused { return TooLarge(limit: limit) }
        var index = 0
        let end = input.count
        if !bomChecked {
            while index < end, bomMatched < 3, input[index] == Self.bom[bomMatched] {
                bomMatched += 1
                index += 1
            }
            if bomMatched < 3 && index == end { return nil }  // a BOM's beginning so far: wait for the next byte
            bomChecked = true
            // Not a BOM: the bytes taken are the first line's.
            if bomMatched < 3 { line.append(contentsOf: Self.bom[..<bomMatched]) }
        }
        if afterCR, index < end {
            afterCR = false
            if input[index] == Self.lf { index += 1 }  // the LF of a CRLF split between two pieces
        }
        var start = index
        while index < end {
            let byte = input[index]
            guard byte == Self.lf || byte == Self.cr else {
                index += 1
                continue
            }
            if let failure = endLine(UnsafeBufferPointer(rebasing: input[start..<index]), visit) { return failure }
            index += 1
            if byte == Self.cr {
                if index == end {
                    afterCR = true
                } else if input[index] == Self.lf {
                    index += 1
                }
            }
            start = index
        }
        if start < end {
            guard data.count + line.count + (end - start) <= limit else { return refuse() }
            line.append(contentsOf: UnsafeBufferPointer(rebasing: input[start..<end]))
        }
        return nil
    }

    private mutating func refuse() -> TooLarge {
        refused = true
        line = []
        data = []
        return TooLarge(limit: limit)
    }

    /// A line ended: `tail` is its part in the current piece, after the part carried in `line` from earlier ones.
    private mutating func endLine(_ tail: UnsafeBufferPointer<UInt8>, _ visit: (Item) -> Void) -> TooLarge? {
        guard data.count + line.count + tail.count <= limit else { return refuse() }
        if line.isEmpty {
            field(tail, visit)
            return nil
        }
        var whole: [UInt8] = []
        swap(&whole, &line)
        whole.append(contentsOf: tail)
        whole.withUnsafeBufferPointer { field($0, visit) }
        whole.removeAll(keepingCapacity: whole.capacity <= Self.keptCapacity)
        swap(&whole, &line)
        return nil
    }

    /// One whole line.
    private mutating func field(_ line: UnsafeBufferPointer<UInt8>, _ visit: (Item) -> Void) {
        guard let first = line.first else { return dispatch(visit) }
        let colon = first == Self.colon ? 0 : line.firstIndex(of: Self.colon)
        let name = UnsafeBufferPointer(rebasing: line[..<(colon ?? line.count)])
        var value = UnsafeBufferPointer(rebasing: line[(colon.map { $0 + 1 } ?? line.count)...])
        if value.first == Self.space { value = UnsafeBufferPointer(rebasing: value[1...]) }
        switch name.count {
        case 0:
            visit(.comment(String(decoding: value, as: UTF8.self)))
        case 4 where name.elementsEqual("data".utf8):
            if dataLines > 0 { data.append(Self.lf) }
            data.append(contentsOf: value)
            dataLines += 1
        case 5 where name.elementsEqual("event".utf8):
            type = value.isEmpty ? nil : String(decoding: value, as: UTF8.self)
        case 2 where name.elementsEqual("id".utf8):
            guard !value.contains(0) else { return }
            idBuffer = String(decoding: value, as: UTF8.self)
            id = idBuffer
        case 5 where name.elementsEqual("retry".utf8):
            guard !value.isEmpty, value.allSatisfy({ (UInt8(ascii: "0")...UInt8(ascii: "9")).contains($0) }),
                let millis = Int(String(decoding: value, as: UTF8.self))
            else { return }
            reconnectionDelay = TimeInterval(millis) / 1000
            visit(.retry(millis))
        default:
            break
        }
    }

    /// A blank line: the buffered event, if it has data. The last event id is taken either way.
    private mutating func dispatch(_ visit: (Item) -> Void) {
        lastEventId = idBuffer
        if dataLines > 0 {
            visit(.event(Event(type: type ?? "message", data: data, dataLines: dataLines, id: id, lastEventId: lastEventId)))
        }
        data.removeAll(keepingCapacity: data.capacity <= Self.keptCapacity)
        (type, dataLines, id) = (nil, 0, nil)
    }
}
