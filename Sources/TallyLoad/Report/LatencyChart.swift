import Foundation

extension LoadReport {
    /// A latency-over-time chart as SVG: p50 and p99 per second (log scale, ms) above, throughput and
    /// errors per second below.
    public func svgChart() -> String {
        let width = 900.0, top = 40.0, plot = 260.0, gap = 50.0, lower = 120.0, left = 60.0, right = 20.0
        let height = top + plot + gap + lower + 40
        let points = timeline
        let count = max(points.count, 2)
        func x(_ second: Int) -> Double { left + (width - left - right) * Double(second) / Double(count - 1) }
        let maxMs = max(points.map(\.p99).max() ?? 1, 1)
        let decades = max(1, Int(ceil(log10(maxMs * 1.2) + 1)))  // from 0.1 ms
        func y(_ ms: Double) -> Double {
            let value = log10(max(ms, 0.1)) + 1
            return top + plot - plot * value / Double(decades)
        }
        let maxCount = Double(max(points.map(\.count).max() ?? 1, 1))
        func yc(_ value: Double) -> Double { top + plot + gap + lower - lower * value / maxCount }
        func line(_ values: [(Int, Double)], _ transform: (Double) -> Double, color: String) -> String {
            let path = values.map { "\(Self.f(x($0.0))),\(Self.f(transform($0.1)))" }.joined(separator: " ")
            return "<polyline fill=\"none\" stroke=\"\(color)\" stroke-width=\"1.5\" points=\"\(path)\"/>"
        }
        var svg = ["<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"\(Int(width))\" height=\"\(Int(height))\" font-family=\"sans-serif\" font-size=\"11\">"]
        svg.append("<rect width=\"100%\" height=\"100%\" fill=\"white\"/>")
        svg.append("<text x=\"\(Int(left))\" y=\"20\" font-size=\"14\">Latency per second (ms, log scale): p50 blue, p99 red — \(users) users, \(mode)</text>")
        for decade in 0...decades {
            let ms = pow(10, Double(decade) - 1)
            let yy = y(ms)
            svg.append("<line x1=\"\(Int(left))\" x2=\"\(Int(width - right))\" y1=\"\(Self.f(yy))\" y2=\"\(Self.f(yy))\" stroke=\"#ddd\"/>")
            svg.append("<text x=\"\(Int(left - 6))\" y=\"\(Self.f(yy + 4))\" text-anchor=\"end\">\(ms < 1 ? String(ms) : String(Int(ms)))</text>")
        }
        svg.append(line(points.map { ($0.second, $0.p50) }, y, color: "#1f77b4"))
        svg.append(line(points.map { ($0.second, $0.p99) }, y, color: "#d62728"))
        svg.append("<text x=\"\(Int(left))\" y=\"\(Self.f(top + plot + gap - 8))\" font-size=\"14\">Requests completed per second (grey), errors (red); peak \(Int(maxCount))</text>")
        svg.append("<line x1=\"\(Int(left))\" x2=\"\(Int(width - right))\" y1=\"\(Self.f(yc(0)))\" y2=\"\(Self.f(yc(0)))\" stroke=\"#999\"/>")
        svg.append(line(points.map { ($0.second, Double($0.count)) }, yc, color: "#555"))
        svg.append(line(points.map { ($0.second, Double($0.errors)) }, yc, color: "#d62728"))
        for second in Swift.stride(from: 0, to: count, by: max(1, count / 10)) {
            svg.append("<text x=\"\(Self.f(x(second)))\" y=\"\(Self.f(height - 15))\" text-anchor=\"middle\">\(second) s</text>")
        }
        svg.append("</svg>")
        return svg.joined(separator: "\n") + "\n"
    }

    static func f(_ value: Double) -> String { String(format: "%.1f", value) }
}
