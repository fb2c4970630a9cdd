import Foundation
import Yams

/// Decodes the configuration file (YAML, or JSON, which is YAML) into its file-shaped structs, refusing every
/// key that no struct declares, at every level, with where it is and the nearest known key:
/// `unknown key "token" in actions[0]; did you mean "tokens"?`.
///
/// The known keys are not listed anywhere: ``ConfigurationShape/of(_:)`` finds them by letting the structs'
/// own `Decodable` conformance read a value that answers every key. So declaring a property is all it takes
/// for a key to be accepted, and a key nobody declared is refused.
enum ConfigurationDecoding {
    /// Decodes `text` as a `T`; every problem (unknown keys, all of them; else the first wrong value) is a
    /// ``ConfigurationError`` naming the place.
    static func decode<T: Decodable>(_ type: T.Type, from text: String) throws -> T {
        let node: Node
        do {
            node = try Yams.compose(yaml: text) ?? Node.mapping(Node.Mapping([]))
        } catch {
            throw ConfigurationError("the configuration file is not valid YAML or JSON: \(error)")
        }
        var problems: [String] = []
        let shape = ConfigurationShape.of(T.self)
        shape.check(node, at: .root, problems: &problems)
        guard problems.isEmpty else { throw ConfigurationError(problems.joined(separator: "\n")) }
        do {
            return try YAMLDecoder().decode(T.self, from: node)
        } catch let error as DecodingError {
            throw ConfigurationError(describe(error, in: node, shape: shape))
        } catch {
            throw ConfigurationError("the configuration file cannot be read: \(error)")
        }
    }

    /// A decoding error as a sentence naming the place and, for a wrong value, what was found.
    private static func describe(_ error: DecodingError, in node: Node, shape: ConfigurationShape) -> String {
        switch error {
        case .keyNotFound(let key, let context):
            return "missing key \"\(key.stringValue)\" \(ConfigurationPath(context.codingPath).preposition)"
        case .typeMismatch(let type, let context), .valueNotFound(let type, let context):
            let path = ConfigurationPath(context.codingPath)
            let expected = shape.shape(at: path)?.valueType ?? type
            return "\(path): expected \(expectation(expected)), found \(path.find(in: node).map(shown) ?? "nothing")"
        case .dataCorrupted(let context):
            let path = ConfigurationPath(context.codingPath)
            return "\(path): \(path.find(in: node).map(shown) ?? "the value") is not valid here (\(context.debugDescription))"
        @unknown default:
            return "the configuration file cannot be read: \(error)"
        }
    }

    /// What a value of `type` is called in a message.
    private static func expectation(_ type: Any.Type) -> String {
        switch type {
        case is String.Type: return "a string"
        case is Bool.Type: return "true or false"
        case is Double.Type: return "a number"
        case is any FixedWidthInteger.Type: return "a whole number"
        default: return String(describing: type).hasPrefix("Array") ? "a list" : "a mapping ({key: value})"
        }
    }

    /// A node as a message shows it: a scalar quoted, a list or mapping by kind.
    static func shown(_ node: Node) -> String {
        switch node {
        case .scalar(let scalar): return "\"\(scalar.string.prefix(80))\""
        case .sequence: return "a list"
        case .mapping: return "a mapping"
        case .alias: return "an alias"
        }
    }

    /// The known key closest to `key`, if it is close enough to be what was meant: at most one edit (an
    /// insertion, deletion, substitution or swap of neighbours) per four characters of the known key, and
    /// at least one; letter case is not counted.
    static func suggestion(for key: String, among known: [String]) -> String? {
        let scored = known.map { ($0, editDistance(key.lowercased(), $0.lowercased())) }
        guard let best = scored.min(by: { $0.1 < $1.1 }), best.1 <= max(1, best.0.count / 4) else { return nil }
        return best.0
    }

    /// Optimal string alignment distance: insertions, deletions, substitutions and swaps of adjacent characters.
    static func editDistance(_ a: String, _ b: String) -> Int {
        let (a, b) = (Array(a), Array(b))
        guard !a.isEmpty, !b.isEmpty else { return max(a.count, b.count) }
        var rows = [Array(0...b.count), [Int](repeating: 0, count: b.count + 1), [Int](repeating: 0, count: b.count + 1)]
        for i in 1...a.count {
            let (current, previous, beforePrevious) = (i % 3, (i + 2) % 3, (i + 1) % 3)
            rows[current][0] = i
            for j in 1...b.count {
                var cost = min(rows[previous][j] + 1, rows[current][j - 1] + 1, rows[previous][j - 1] + (a[i - 1] == b[j - 1] ? 0 : 1))
                if i > 1, j > 1, a[i - 1] == b[j - 2], a[i - 2] == b[j - 1] { cost = min(cost, rows[beforePrevious][j - 2] + 1) }
                rows[current][j] = cost
            }
        }
        return rows[a.count % 3][b.count]
    }
}

/// A key of a mapping in the file, by its name: for the structs that read or write their keys themselves.
struct ConfigurationKey: CodingKey {
    var stringValue: String
    var intValue: Int? { nil }
    init(stringValue: String) { self.stringValue = stringValue }
    init?(intValue: Int) { nil }
}

/// Where a value is in the file: `limits.signInLockout`, `actions[0]`, `ai.models[1].name`.
struct ConfigurationPath: CustomStringConvertible, Hashable {
    /// A step: a key of a mapping or an index in a list.
    enum Step: Hashable {
        case key(String)
        case index(Int)
    }

    let steps: [Step]

    /// The top level.
    static let root = ConfigurationPath(steps: [])

    init(steps: [Step]) { self.steps = steps }

    /// The path a decoder's coding path names.
    init(_ codingPath: [any CodingKey]) {
        steps = codingPath.map { key in key.intValue.map(Step.index) ?? .key(key.stringValue) }
    }

    /// This path and then `step`.
    func appending(_ step: Step) -> ConfigurationPath { ConfigurationPath(steps: steps + [step]) }

    var description: String {
        var text = ""
        for step in steps {
            switch step {
            case .key(let key): text += text.isEmpty ? key : ".\(key)"
            case .index(let index): text += "[\(index)]"
            }
        }
        return text.isEmpty ? "the top level" : text
    }

    /// "in actions[0]", or "at the top level".
    var preposition: String { steps.isEmpty ? "at the top level" : "in \(self)" }

    /// The node at this path in `root`, if there is one.
    func find(in root: Node) -> Node? {
        var node: Node? = root
        for step in steps {
            switch (step, node) {
            case (.key(let key), .mapping(let mapping)?): node = mapping.first { $0.key.string == key }?.value
            case (.index(let index), .sequence(let sequence)?): node = index < sequence.count ? sequence[index] : nil
            default: return nil
            }
        }
        return node
    }
}

/// The keys a file-shaped `Decodable` type reads, at every level: a value, a list of something, or a
/// mapping of known keys. Found by ``of(_:)``.
final class ConfigurationShape {
    /// What a node must be.
    enum Kind { case value, list, mapping }

    private(set) var kind = Kind.value
    /// A value's type (`Int`, `String`…), when the probe saw it.
    private(set) var valueType: Any.Type?
    /// A list's element.
    private(set) var element: ConfigurationShape?
    /// A mapping's keys, in declaration order.
    private(set) var keys: [(name: String, shape: ConfigurationShape)] = []

    /// The shape of `type`, found by decoding it once from a probe that offers every key it asks for.
    static func of<T: Decodable>(_ type: T.Type) -> ConfigurationShape {
        let probe = ShapeProbe()
        _ = try? T(from: probe)
        return probe.shape
    }

    /// The shape of the key `name` of this mapping.
    func key(_ name: String) -> ConfigurationShape? { keys.first { $0.name == name }?.shape }

    /// Adds to `problems` every key of `node` (and below) this shape does not know, and every list or mapping
    /// found where the other was expected; values are left to the decoder.
    func check(_ node: Node, at path: ConfigurationPath, problems: inout [String]) {
        switch (kind, node) {
        case (.value, _):
            // A value's type is the decoder's to judge,
            return
        case _ where node.null != nil:
            // and so is an empty key (`limits:` alone, which keeps the defaults).
            return
        case (.list, .sequence(let sequence)):
            for (index, item) in sequence.enumerated() {
                element?.check(item, at: path.appending(.index(index)), problems: &problems)
            }
        case (.mapping, .mapping(let mapping)):
            // (A key given twice is refused by the parser already.)
            for (keyNode, value) in mapping {
                let key = keyNode.string ?? ""
                guard let shape = self.key(key) else {
                    let known = keys.map(\.name)
                    problems.append(
                        "unknown key \"\(key)\" \(path.preposition)"
                            + (ConfigurationDecoding.suggestion(for: key, among: known).map { "; did you mean \"\($0)\"?" }
                                ?? "; known keys: \(known.joined(separator: ", "))"))
                    continue
                }
                shape.check(value, at: path.appending(.key(key)), problems: &problems)
            }
        case (.list, _):
            problems.append("\(path): expected a list ([…] or lines starting with '- '), found \(ConfigurationDecoding.shown(node))")
        case (.mapping, _):
            problems.append("\(path): expected a mapping ({key: value}), found \(ConfigurationDecoding.shown(node))")
        }
    }

    fileprivate func becomeMapping() { kind = .mapping }

    fileprivate func becomeValue(_ type: Any.Type) { valueType = type }

    /// The shape at `path` below this one.
    func shape(at path: ConfigurationPath) -> ConfigurationShape? {
        var current: ConfigurationShape? = self
        for step in path.steps {
            switch step {
            case .key(let name): current = current?.key(name)
            case .index: current = current?.element
            }
        }
        return current
    }

    fileprivate func becomeList() -> ConfigurationShape {
        kind = .list
        let element = self.element ?? ConfigurationShape()
        self.element = element
        return element
    }

    fileprivate func addKey(_ name: String) -> ConfigurationShape {
        if let known = key(name) { return known }
        let shape = ConfigurationShape()
        keys.append((name, shape))
        return shape
    }
}

/// A `Decoder` that answers every key with a placeholder (`0`, `""`, `false`, a one-element list) and
/// notes what was asked: run through a type's `init(from:)`, it records the type's ``ConfigurationShape``.
private final class ShapeProbe: Decoder {
    let shape: ConfigurationShape
    var codingPath: [any CodingKey] { [] }
    var userInfo: [CodingUserInfoKey: Any] { [:] }

    init(_ shape: ConfigurationShape = ConfigurationShape()) { self.shape = shape }

    func container<Key: CodingKey>(keyedBy type: Key.Type) -> KeyedDecodingContainer<Key> {
        shape.becomeMapping()
        return KeyedDecodingContainer(Keyed<Key>(shape: shape))
    }

    func unkeyedContainer() -> any UnkeyedDecodingContainer { Unkeyed(element: shape.becomeList()) }

    func singleValueContainer() -> any SingleValueDecodingContainer { Single(shape: shape) }

    /// A placeholder `T`, recording its shape into `shape`.
    static func placeholder<T: Decodable>(_ type: T.Type, into shape: ConfigurationShape) throws -> T {
        let value: Any
        switch type {
        case is String.Type: value = ""
        case is Bool.Type: value = false
        case is Double.Type: value = 0.0
        case is Int.Type: value = 0
        case is Int64.Type: value = Int64(0)
        default: return try T(from: ShapeProbe(shape))
        }
        shape.becomeValue(type)
        return value as! T
    }

    private struct Keyed<Key: CodingKey>: KeyedDecodingContainerProtocol {
        let shape: ConfigurationShape
        var codingPath: [any CodingKey] { [] }
        var allKeys: [Key] { [] }
        func contains(_ key: Key) -> Bool { true }
        func decodeNil(forKey key: Key) -> Bool { false }
        func decode<T: Decodable>(_ type: T.Type, forKey key: Key) throws -> T {
            try ShapeProbe.placeholder(type, into: shape.addKey(key.stringValue))
        }
        func nestedContainer<NestedKey: CodingKey>(keyedBy type: NestedKey.Type, forKey key: Key) -> KeyedDecodingContainer<NestedKey> {
            ShapeProbe(shape.addKey(key.stringValue)).container(keyedBy: type)
        }
        func nestedUnkeyedContainer(forKey key: Key) -> any UnkeyedDecodingContainer {
            ShapeProbe(shape.addKey(key.stringValue)).unkeyedContainer()
        }
        func superDecoder() -> any Decoder { ShapeProbe(shape) }
        func superDecoder(forKey key: Key) -> any Decoder { ShapeProbe(shape.addKey(key.stringValue)) }
    }

    private struct Unkeyed: UnkeyedDecodingContainer {
        let element: ConfigurationShape
        var codingPath: [any CodingKey] { [] }
        var count: Int? { 1 }
        var currentIndex = 0
        var isAtEnd: Bool { currentIndex >= 1 }
        mutating func decodeNil() -> Bool { false }
        mutating func decode<T: Decodable>(_ type: T.Type) throws -> T {
            currentIndex += 1
            return try ShapeProbe.placeholder(type, into: element)
        }
        mutating func nestedContainer<NestedKey: CodingKey>(keyedBy type: NestedKey.Type) -> KeyedDecodingContainer<NestedKey> {
            currentIndex += 1
            return ShapeProbe(element).container(keyedBy: type)
        }
        mutating func nestedUnkeyedContainer() -> any UnkeyedDecodingContainer {
            currentIndex += 1
            return ShapeProbe(element).unkeyedContainer()
        }
        mutating func superDecoder() -> any Decoder {
            currentIndex += 1
            return ShapeProbe(element)
        }
    }

    private struct Single: SingleValueDecodingContainer {
        let shape: ConfigurationShape
        var codingPath: [any CodingKey] { [] }
        func decodeNil() -> Bool { false }
        func decode<T: Decodable>(_ type: T.Type) throws -> T { try ShapeProbe.placeholder(type, into: shape) }
    }
}
