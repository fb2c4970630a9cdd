/// Edits of an example's `tally.yaml` copy before a test's server reads it: pointing a URL at a process the test
/// started on a free port. Line by line, so the file's comments and layout stay as written.
enum ConfigLines {
    /// `config`'s text with the `key:` line of its top-level `section:` (at any depth within it) set to `value`,
    /// its indentation kept; nil when there is no such section; throws when the section has no such line.
    static func set(_ key: String, inSection section: String, to value: String, of config: String) throws -> String? {
        var lines = config.components(separatedBy: "\n")
        guard let start = lines.firstIndex(where: { $0.hasPrefix("\(section):") }) else { return nil }
        let inSection = lines[(start + 1)...].prefix { $0.isEmpty || $0.hasPrefix(" ") || $0.hasPrefix("#") }
        guard let line = inSection.indices.first(where: { lines[$0].trimmingCharacters(in: .whitespaces).hasPrefix("\(key):") }) else {
            throw ExampleError("the \(section): section needs a \(key): line of its own for the test to point")
        }
        let indent = lines[line].prefix { $0 == " " }
        lines[line] = "\(indent)\(key): \(value)"
        return lines.joined(separator: "\n")
    }
}
