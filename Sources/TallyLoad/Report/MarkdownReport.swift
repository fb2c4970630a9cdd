import Foundation

extension LoadReport {
    /// The report as Markdown: the run, per-operation latency and outcomes, server resources, the SDK's
    /// read counts and the books.
    public func markdown(chart: String? = nil) -> String {
        var lines: [String] = []
        lines.append("## Load test: \(users) users (\(sdkUsers) through the SDK, \(syncUsers) syncing documents), \(mode), \(Self.format(durationSeconds)) s")
        lines.append("")
        lines.append("Servers: \(servers.joined(separator: ", ")). Set-up (connect, sign in, first grant): \(Self.format(setupSeconds)) s, \(usersReady) of \(users) users ready. Seed \(seed).")
        if !faults.isEmpty { lines.append("Faults injected: \(faults.joined(separator: "; ")).") }
        lines.append("")
        lines.append("| operation | requests | per s | p50 ms | p95 ms | p99 ms | max ms | errors | retried | statuses |")
        lines.append("|---|---:|---:|---:|---:|---:|---:|---:|---:|---|")
        for operation in operations + [total] { lines.append(Self.row(operation)) }
        lines.append("")
        if !setup.isEmpty {
            lines.append("Outside the measured phase (set-up and books check):")
            lines.append("")
            lines.append("| operation | requests | p50 ms | p99 ms | max ms | errors | retried |")
            lines.append("|---|---:|---:|---:|---:|---:|---:|")
            for operation in setup {
                lines.append("| \(operation.name) | \(operation.count) | \(Self.format(operation.p50)) | \(Self.format(operation.p99)) | \(Self.format(operation.max)) | \(operation.errors) | \(operation.retries) |")
            }
            lines.append("")
        }
        lines.append("Resources over the measured phase (sampled once a second):")
        lines.append("")
        lines.append("| process | CPU % of one core, median | max | resident MB, median | max |")
        lines.append("|---|---:|---:|---:|---:|")
        for name in Set(samples.map(\.process)).sorted() {
            let mine = samples.filter { $0.process == name }
            let cpu = mine.map(\.cpuPercent).sorted()
            let rss = mine.map { Double($0.residentBytes) / 1_048_576 }.sorted()
            lines.append("| \(name) | \(Self.format(Self.median(cpu))) | \(Self.format(cpu.last ?? 0)) | \(Self.format(Self.median(rss))) | \(Self.format(rss.last ?? 0)) |")
        }
        lines.append("")
        lines.append(
            "CPU per operation over the measured phase (\(cost.operations) operations): servers \(Self.format(cost.serverMicroseconds)) µs, "
                + "database (every postgres and pgbouncer process) \(Self.format(cost.databaseMicroseconds)) µs, "
                + "together \(Self.format(cost.serverMicroseconds + cost.databaseMicroseconds)) µs "
                + "(\(Self.format(cost.serverSeconds)) s and \(Self.format(cost.databaseSeconds)) s of CPU).")
        lines.append("")
        if sdkUsers > 0 {
            let saved = sdk.logicalReads > 0 ? 100 * (1 - Double(sdk.serverReads) / Double(sdk.logicalReads)) : 0
            lines.append("SDK users: their views asked for \(sdk.logicalReads) reads; \(sdk.serverReads) requests reached the server (\(Self.format(saved)) % fewer), of which \(sdk.notModified) were answered 304. Cache hits \(sdk.cacheHits), coalesced into another app call \(sdk.coalesced), retried attempts \(sdk.retried). Each app only merges its own reads: \(sdkUsers) apps can never share one request.")
            lines.append("")
        }
        lines.append(books.balanced ? "**Books balanced**" : "**Books DO NOT balance**")
        lines.append("")
        lines.append("\(books.accounts) accounts checked (\(books.unreadable) unreadable): \(books.grants) grants, \(books.debits) token charges, \(books.captures) captured holds, \(books.refused) requests refused with a 4xx, \(books.uncertain) SDK actions of unknown outcome (each allowed at most one charge). Violations: \(books.violationCount).")
        for violation in books.violations.prefix(20) { lines.append("- \(violation)") }
        if syncUsers > 0 {
            let sync = books.sync
            lines.append("")
            lines.append(
                "Synced documents: \(sync.users) users checked (\(sync.unreadable) unreadable, \(sync.unsettled) with an outbox left), \(sync.mutations) mutations in \(sync.pushes) answered pushes, \(sync.duplicates) answered `duplicate` (resent batches); events received: \(sync.changedEvents) `changed`, \(sync.walletEvents) `wallet`. Every acknowledged mutation on the server exactly once, the documents the replay of them: \(sync.violationCount == 0 ? "yes" : "NO, \(sync.violationCount) violations").")
            for violation in sync.violations.prefix(20) { lines.append("- \(violation)") }
        }
        if let outage {
            lines += ["", outage.passed ? "**Database outage weathered**" : "**Database outage NOT weathered**", ""]
            lines.append(
                "Down \(Self.format(outage.downSeconds)) s. Probe writes answered \(outage.writes), `/ready` \(outage.ready); "
                    + "503s without Retry-After: \(outage.withoutRetryAfter); slowest answer \(Self.format(outage.slowestSeconds * 1000)) ms "
                    + "(limit \(Self.format(outage.answerWithinSeconds * 1000))). Writes served again after "
                    + "\(outage.recoverySeconds.map { Self.format($0) }.joined(separator: ", ")) s (limit \(Self.format(outage.recoverWithinSeconds))); "
                    + "SIGTERM with the database down: exit after \(outage.shutdownSeconds.map { Self.format($0) }.joined(separator: ", ")) s "
                    + "(limit \(Self.format(outage.shutdownWithinSeconds))).")
            for failure in outage.failures { lines.append("- \(failure)") }
        }
        if let chart { lines += ["", "![latency over time](\(chart))"] }
        return lines.joined(separator: "\n") + "\n"
    }

    static func row(_ operation: OperationSummary) -> String {
        let statuses = operation.outcomes.sorted { $0.key < $1.key }.map { "\($0.key)×\($0.value)" }.joined(separator: " ")
        return "| \(operation.name) | \(operation.count) | \(format(operation.perSecond)) | \(format(operation.p50)) | \(format(operation.p95)) | \(format(operation.p99)) | \(format(operation.max)) | \(operation.errors) | \(operation.retries) | \(statuses) |"
    }

    static func format(_ value: Double) -> String {
        value >= 100 ? String(format: "%.0f", value) : value >= 10 ? String(format: "%.1f", value) : String(format: "%.2f", value)
    }

    static func median(_ sorted: [Double]) -> Double { sorted.isEmpty ? 0 : sorted[sorted.count / 2] }
}
