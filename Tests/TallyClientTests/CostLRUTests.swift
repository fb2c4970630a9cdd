import TallyTestSupport
import Testing
@testable import TallyClient

@Suite(.timeLimit(.minutes(1))) struct CostLRUTests {
    @Test func evictsLeastRecentlyUsedByCount() {
        var lru = CostLRU<String, Int>(countLimit: 3, costLimit: 1_000)
        lru.insert(1, forKey: "a", cost: 1)
        lru.insert(2, forKey: "b", cost: 1)
        lru.insert(3, forKey: "c", cost: 1)
        #expect(lru.value(forKey: "a") == 1)  // refreshes "a"
        #expect(lru.peek("b") == 2)  // does not refresh "b"
        #expect(lru.keysByRecency == ["a", "c", "b"])

        let evicted = lru.insert(4, forKey: "d", cost: 1)
        #expect(evicted.map(\.key) == ["b"])
        #expect(evicted.map(\.value) == [2])
        #expect(lru.keysByRecency == ["d", "a", "c"])
        #expect(lru.count == 3)
        #expect(lru.peek("b") == nil)
    }

    @Test func evictsLeastRecentlyUsedByCost() {
        var lru = CostLRU<String, String>(countLimit: 100, costLimit: 100)
        lru.insert("A", forKey: "a", cost: 40)
        lru.insert("B", forKey: "b", cost: 40)
        lru.insert("C", forKey: "c", cost: 20)
        #expect(lru.totalCost == 100)
        _ = lru.value(forKey: "a")

        // Needs 50 bytes: "b" (40) then "c" (20) go, oldest first; "a" stays.
        let evicted = lru.insert("D", forKey: "d", cost: 50)
        #expect(evicted.map(\.key) == ["b", "c"])
        #expect(lru.keysByRecency == ["d", "a"])
        #expect(lru.totalCost == 90)
    }

    @Test func replacingUpdatesCostAndRecency() {
        var lru = CostLRU<String, Int>(countLimit: 10, costLimit: 100)
        lru.insert(1, forKey: "a", cost: 10)
        lru.insert(2, forKey: "b", cost: 10)
        let evicted = lru.insert(3, forKey: "a", cost: 60)
        #expect(evicted.isEmpty)
        #expect(lru.count == 2)
        #expect(lru.totalCost == 70)
        #expect(lru.keysByRecency == ["a", "b"])
        #expect(lru.peek("a") == 3)

        // Growing "b" past the limit evicts the older "a", never the entry just written.
        let second = lru.insert(4, forKey: "b", cost: 90)
        #expect(second.map(\.key) == ["a"])
        #expect(lru.totalCost == 90)
        #expect(lru.keysByRecency == ["b"])
    }

    @Test func oversizeValueIsRejected() {
        var lru = CostLRU<String, Int>(countLimit: 10, costLimit: 100)
        lru.insert(1, forKey: "a", cost: 10)
        lru.insert(2, forKey: "b", cost: 10)

        let rejected = lru.insert(3, forKey: "c", cost: 101)
        #expect(rejected.map(\.key) == ["c"])
        #expect(lru.peek("c") == nil)
        #expect(lru.keysByRecency == ["b", "a"])

        // Oversize replacement: the old value goes too, old first.
        let replaced = lru.insert(4, forKey: "a", cost: 500)
        #expect(replaced.map(\.key) == ["a", "a"])
        #expect(replaced.map(\.value) == [1, 4])
        #expect(lru.keysByRecency == ["b"])
        #expect(lru.totalCost == 10)
    }

    @Test func removesByKeyPrefixAndAll() {
        var lru = CostLRU<String, Int>(countLimit: 10, costLimit: 100)
        for (i, key) in ["user1/a", "user2/a", "user1/b", "user2/b"].enumerated() {
            lru.insert(i, forKey: key, cost: 5)
        }
        lru.removeAll { $0.hasPrefix("user1/") }
        #expect(lru.keysByRecency == ["user2/b", "user2/a"])
        #expect(lru.totalCost == 10)
        #expect(lru.removeValue(forKey: "user2/a") == 1)
        #expect(lru.removeValue(forKey: "user2/a") == nil)
        #expect(lru.keysByRecency == ["user2/b"])

        lru.removeAll()
        #expect(lru.count == 0)
        #expect(lru.totalCost == 0)
        lru.insert(9, forKey: "x", cost: 1)
        #expect(lru.keysByRecency == ["x"])
    }

    @Test func matchesReferenceModel() {
        var random = SplitMix64(seed: 0x5EED)
        var lru = CostLRU<Int, Int>(countLimit: 20, costLimit: 200)
        var model = ReferenceLRU(countLimit: 20, costLimit: 200)

        for step in 0..<20_000 {
            let key = Int.random(in: 0..<40, using: &random)
            switch Int.random(in: 0..<100, using: &random) {
            case 0..<45:
                let cost = Int.random(in: 0..<100, using: &random) == 0
                    ? Int.random(in: 201...400, using: &random)
                    : Int.random(in: 0...40, using: &random)
                let got = lru.insert(step, forKey: key, cost: cost)
                let want = model.insert(step, forKey: key, cost: cost)
                #expect(got.map(\.key) == want.map(\.key), "step \(step)")
                #expect(got.map(\.value) == want.map(\.value), "step \(step)")
            case 45..<70:
                #expect(lru.value(forKey: key) == model.value(forKey: key), "step \(step)")
            case 70..<85:
                #expect(lru.peek(key) == model.peek(key), "step \(step)")
            case 85..<98:
                #expect(lru.removeValue(forKey: key) == model.removeValue(forKey: key), "step \(step)")
            case 98:
                let modulus = Int.random(in: 2...5, using: &random)
                lru.removeAll { $0 % modulus == 0 }
                model.removeAll { $0 % modulus == 0 }
            default:
                if Int.random(in: 0..<10, using: &random) == 0 {
                    lru.removeAll()
                    model.removeAll { _ in true }
                }
            }
            #expect(lru.count == model.entries.count, "step \(step)")
            #expect(lru.totalCost == model.totalCost, "step \(step)")
            #expect(lru.keysByRecency == model.entries.map(\.key), "step \(step)")
            if lru.keysByRecency != model.entries.map(\.key) { break }
        }
    }
}

/// The obvious LRU: an array ordered from most to least recently used.
private struct ReferenceLRU {
    let countLimit: Int
    let costLimit: Int
    var entries: [(key: Int, value: Int, cost: Int)] = []
    var totalCost: Int { entries.reduce(0) { $0 + $1.cost } }

    init(countLimit: Int, costLimit: Int) {
        self.countLimit = countLimit
        self.costLimit = costLimit
    }

    func peek(_ key: Int) -> Int? { entries.first { $0.key == key }?.value }

    mutating func value(forKey key: Int) -> Int? {
        guard let i = entries.firstIndex(where: { $0.key == key }) else { return nil }
        let entry = entries.remove(at: i)
        entries.insert(entry, at: 0)
        return entry.value
    }

    mutating func removeValue(forKey key: Int) -> Int? {
        guard let i = entries.firstIndex(where: { $0.key == key }) else { return nil }
        return entries.remove(at: i).value
    }

    mutating func removeAll(where shouldRemove: (Int) -> Bool) {
        entries.removeAll { shouldRemove($0.key) }
    }

    mutating func insert(_ value: Int, forKey key: Int, cost: Int) -> [(key: Int, value: Int)] {
        var evicted: [(key: Int, value: Int)] = []
        if cost > costLimit {
            if let old = removeValue(forKey: key) { evicted.append((key, old)) }
            evicted.append((key, value))
            return evicted
        }
        _ = removeValue(forKey: key)
        entries.insert((key, value, cost), at: 0)
        while entries.count > countLimit || totalCost > costLimit {
            let last = entries.removeLast()
            evicted.append((last.key, last.value))
        }
        return evicted
    }
}
