import Foundation
import Prometheus
import Synchronization
import TallyStore

/// This process's request rate, error rate and latency over the last hour, as 10-second samples in a ring buffer,
/// taken from its own Prometheus registry (what `/metrics` shows: every request of both listeners).
///
/// Sampled when the overview is read, not by a timer: the requests and the latency histogram's buckets since the
/// previous reading are spread evenly over the 10-second slots between the two readings, so a slot's value is the
/// average of the interval it belongs to (exact when the overview is read every 10 seconds, smoothed otherwise).
final class ProcessSamples: Sendable {
    /// One 10-second slot.
    struct Sample: Sendable {
        var requests: Double = 0
        var errors: Double = 0
        /// Requests per latency bucket (upper bounds in ``Reading/bounds``).
        var buckets: [Double] = []
    }

    /// The counters of the registry at one instant.
    struct Reading: Sendable {
        var requests: Double = 0
        var errors: Double = 0
        /// Cumulative counts per histogram bound (`le`), summed over routes.
        var cumulative: [Double: Double] = [:]
    }

    static let slot: TimeInterval = 10
    static let slots = 360

    private struct State {
        var samples: [Int: Sample] = [:]  // by slot number (seconds since 1970 / 10)
        var last: (slot: Int, reading: Reading)?
        var bounds: [Double] = []
    }

    private let registry: PrometheusCollectorRegistry
    private let state = Mutex(State())

    init(registry: PrometheusCollectorRegistry) {
        self.registry = registry
    }

    /// Reads the registry now and spreads what happened since the last reading over the slots in between.
    func sample(now: Date) {
        var buffer: [UInt8] = []
        registry.emit(into: &buffer)
        let reading = Self.parse(String(decoding: buffer, as: UTF8.self))
        let slot = Int(saturating: now.timeIntervalSince1970 / Self.slot, rounding: .down)
        state.withLock { state in
            let bounds = reading.cumulative.keys.sorted()
            state.bounds = bounds
            defer { state.last = (slot, reading) }
            guard let last = state.last, slot > last.slot else { return }
            let span = min(slot - last.slot, Self.slots)
            let requests = max(0, reading.requests - last.reading.requests) / Double(span)
            let errors = max(0, reading.errors - last.reading.errors) / Double(span)
            var previous = 0.0
            let buckets = bounds.map { bound -> Double in
                let cumulative = max(0, (reading.cumulative[bound] ?? 0) - (last.reading.cumulative[bound] ?? 0))
                defer { previous = cumulative }
                return max(0, cumulative - previous) / Double(span)
            }
            for s in (slot - span + 1)...slot { state.samples[s] = Sample(requests: requests, errors: errors, buckets: buckets) }
            state.samples = state.samples.filter { $0.key > slot - Self.slots }
        }
    }

    /// The last hour's slots, oldest first (a slot without a reading is `nil`), and the histogram's bounds.
    func series(now: Date) -> (samples: [Sample?], bounds: [Double]) {
        let slot = Int(saturating: now.timeIntervalSince1970 / Self.slot, rounding: .down)
        return state.withLock { state in
            ((slot - Self.slots + 1...slot).map { state.samples[$0] }, state.bounds)
        }
    }

    /// The request counter and the latency histogram in Prometheus' text format, summed over their labels.
    static func parse(_ text: String) -> Reading {
        var reading = Reading()
        for line in text.split(separator: "\n") where line.hasPrefix("tally_http_request") {
            guard let space = line.lastIndex(of: " "), let value = Double(line[line.index(after: space)...]) else { continue }
            if line.hasPrefix("tally_http_requests_total{") {
                reading.requests += value
                if line.contains("status=\"5") { reading.errors += value }
            } else if line.hasPrefix("tally_http_request_duration_seconds_bucket{"),
                let le = line.range(of: "le=\""), let end = line[le.upperBound...].firstIndex(of: "\"")
            {
                let bound = Double(line[le.upperBound..<end]) ?? .infinity
                reading.cumulative[bound, default: 0] += value
            }
        }
        return reading
    }

    /// The `quantile` latency of a slot's buckets: the upper bound of the bucket it falls in (`nil` without requests).
    static func quantile(_ quantile: Double, _ sample: Sample, bounds: [Double]) -> Double? {
        let total = sample.buckets.reduce(0, +)
        guard total > 0 else { return nil }
        var seen = 0.0
        for (index, count) in sample.buckets.enumerated() {
            seen += count
            if seen >= quantile * total { return bounds[index] }
        }
        return bounds.last
    }
}

/// Server-rendered SVG charts: no script, no inline style (the stylesheet colours them by class), a `<title>` for
/// screen readers.
enum SVGChart {
    /// A line over `values` (a gap where a value is `nil`), scaled to its maximum.
    static func line(_ values: [Double?], title: String, unit: String) -> String {
        let (width, height) = (360, 90)
        let top = max(values.compactMap { $0 }.max() ?? 0, 1e-9)
        var path = ""
        var pen = false
        for (index, value) in values.enumerated() {
            guard let value, value.isFinite else {
                pen = false
                continue
            }
            let x = Double(index) / Double(max(values.count - 1, 1)) * Double(width)
            let y = Double(height) - value / top * Double(height - 12)
            // A new stretch starts with a one-unit tick, so a lone sample shows as a dot.
            path += (pen ? " L" : " M") + String(format: "%.1f %.1f", x, y) + (pen ? "" : " h1")
            pen = true
        }
        let label = values.compactMap { $0 }.isEmpty ? "no samples yet" : "max \(format(top)) \(unit)"
        return """
            <svg viewBox="0 0 \(width) \(height + 14)" role="img" aria-label="\(escape(title))"><title>\(escape(title))</title>\
            <line class="axis" x1="0" y1="\(height)" x2="\(width)" y2="\(height)"/>\
            \(path.isEmpty ? "" : "<path class=\"line\" d=\"\(path)\"/>")\
            <text x="0" y="\(height + 12)">−1 h</text><text x="\(width - 40)" y="\(height + 12)">now</text>\
            <text x="0" y="10">\(escape(label))</text></svg>
            """
    }

    /// Horizontal bars, one per row, scaled to the largest: each row's label whole on a line of its own (a model's
    /// name can be long), its bar and value under it. The chart is as wide as its longest label needs.
    static func bars(_ rows: [(label: String, value: Double)], title: String) -> String {
        let (rowHeight, barHeight, valueRoom) = (28, 8, 60)
        // 10-px text (the stylesheet's) is at most about 6.5 px a character.
        let width = max(360, rows.map { $0.label.count * 13 / 2 }.max() ?? 0)
        let top = max(rows.map { abs($0.value) }.max() ?? 0, 1e-9)
        var body = ""
        for (index, row) in rows.enumerated() {
            let y = index * rowHeight
            let length = abs(row.value) / top * Double(width - valueRoom)
            body += "<text x=\"0\" y=\"\(y + 11)\">\(escape(row.label))</text>"
            body += "<rect class=\"\(row.value < 0 ? "bar2" : "bar")\" x=\"0\" y=\"\(y + 15)\" width=\"\(String(format: "%.1f", length))\" height=\"\(barHeight)\"/>"
            body += "<text x=\"\(String(format: "%.1f", length + 4))\" y=\"\(y + 23)\">\(format(row.value))</text>"
        }
        let height = max(rows.count, 1) * rowHeight
        return """
            <svg class="bars" viewBox="0 0 \(width) \(height)" role="img" aria-label="\(escape(title))"><title>\(escape(title))</title>\(body)</svg>
            """
    }

    static func format(_ value: Double) -> String {
        if abs(value) < 1e15, let whole = Int64(exactly: value) { return String(whole) }
        return abs(value) >= 10 ? String(format: "%.0f", value) : String(format: "%.2f", value)
    }

    /// Text for SVG (the charts are built here, not by Mustache, so they escape their own text).
    static func escape(_ text: String) -> String {
        var out = ""
        for character in text {
            switch character {
            case "&": out += "&amp;"
            case "<": out += "&lt;"
            case ">": out += "&gt;"
            case "\"": out += "&quot;"
            case "'": out += "&#39;"
            default: out.append(character)
            }
        }
        return out
    }
}
