import Foundation
import TallyAPI

/// Chat prompts of the three kinds whose tokens per byte differ most (English, Japanese, code), ten of each, short
/// to long, some with a system message or a conversation: what the prompt estimate is learned from and judged on.
/// Measured with GPT-4's tokenizer (cl100k): 0.25, 0.39 and 0.33 tokens per byte.
enum PromptSamples {
    /// The three kinds, by name.
    static let kinds: [(name: String, prompts: [[ChatMessage]])] = [("English", english), ("Japanese", japanese), ("code", code)]

    /// English questions, requests and pasted text.
    static let english: [[ChatMessage]] = [
        [ChatMessage(role: "user", content: "Tell me about the stars")],
        [ChatMessage(role: "user", content: "What is the difference between a hurricane and a typhoon? Keep it short, please.")],
        [
            ChatMessage(role: "system", content: "You are a helpful assistant that answers briefly."),
            ChatMessage(role: "user", content: "How many cups are in a quart, and how many quarts are in a gallon?"),
        ],
        [ChatMessage(role: "user", content: "Write a friendly two-sentence reminder to my team that the quarterly report is due on Friday, and that they should send their figures to Maria by Wednesday noon.")],
        [ChatMessage(role: "user", content: "Summarize this paragraph in one sentence:\n\nThe city council met on Tuesday evening to discuss the proposed expansion of the public library. Several residents spoke in favor of the plan, citing the need for more study space and longer opening hours, while others worried about the cost and the loss of parking. The council agreed to commission a detailed budget before voting next month.")],
        [ChatMessage(role: "user", content: "I'm planning a three-day trip to Lisbon in late September. Could you suggest a rough itinerary with one neighbourhood per day, a good place for lunch in each, and something to do in the evening? I don't like crowded tourist traps.")],
        [
            ChatMessage(role: "system", content: "You are an expert editor. Correct grammar and spelling, keep the author's voice."),
            ChatMessage(role: "user", content: "Their going to announce the results tomorow, but nobody know's exactly when. I think it will be after lunch, because the director have a meeting in the morning."),
        ],
        [ChatMessage(role: "user", content: "Explain, as if to a twelve-year-old, why the sky looks blue during the day but red and orange at sunset.")],
        [ChatMessage(role: "user", content: "Give me three ideas for a vegetarian dinner that takes less than thirty minutes.")],
        [
            ChatMessage(role: "user", content: "What were the main causes of the First World War?"),
            ChatMessage(role: "assistant", content: "The main causes are often summarized as militarism, alliances, imperialism and nationalism, with the assassination of Archduke Franz Ferdinand in June 1914 as the immediate trigger."),
            ChatMessage(role: "user", content: "Which of those mattered most, in the view of most historians today?"),
        ],
    ]

    /// The same kinds of requests in Japanese.
    static let japanese: [[ChatMessage]] = [
        [ChatMessage(role: "user", content: "星について教えてください")],
        [ChatMessage(role: "user", content: "台風とハリケーンの違いは何ですか?短く説明してください。")],
        [
            ChatMessage(role: "system", content: "あなたは簡潔に答えるアシスタントです。"),
            ChatMessage(role: "user", content: "明日の東京の天気に合わせて、どんな服装がいいか提案してください。"),
        ],
        [ChatMessage(role: "user", content: "チームのみんなに、四半期報告書の締め切りが金曜日であること、数字は水曜日の正午までにマリアさんに送ることを、丁寧に伝えるメッセージを書いてください。")],
        [ChatMessage(role: "user", content: "次の文章を一文で要約してください。\n\n市議会は火曜日の夜に会合を開き、公立図書館の拡張計画について話し合った。多くの住民が学習スペースの不足や開館時間の延長を理由に賛成したが、費用や駐車場の減少を心配する声もあった。議会は来月の採決の前に詳しい予算案を作成することで合意した。")],
        [ChatMessage(role: "user", content: "九月の終わりに京都へ三日間旅行します。一日ごとに一つの地域を選び、昼ごはんのおすすめと夜の過ごし方を教えてください。混雑した観光地は苦手です。")],
        [ChatMessage(role: "user", content: "空が昼は青く、夕方は赤く見えるのはなぜですか?小学生にもわかるように説明してください。")],
        [ChatMessage(role: "user", content: "三十分以内で作れるベジタリアンの夕食のアイデアを三つください。")],
        [
            ChatMessage(role: "user", content: "第一次世界大戦の主な原因は何ですか?"),
            ChatMessage(role: "assistant", content: "一般的には軍国主義、同盟関係、帝国主義、民族主義が挙げられ、1914年6月のフランツ・フェルディナント大公の暗殺が直接のきっかけとされています。"),
            ChatMessage(role: "user", content: "その中で、今日の歴史家が最も重視しているのはどれですか?"),
        ],
        [
            ChatMessage(role: "system", content: "あなたは日本語の校正者です。"),
            ChatMessage(role: "user", content: "以下の文の誤りを直してください:明日わ雨がふるかもしれないので、かさを持っていたほうがいいとおもいます。"),
        ],
    ]

    /// Code questions: an English request and a snippet (Swift, Python, TypeScript, SQL, Go, Rust, shell, a regex).
    static let code: [[ChatMessage]] = [
        [ChatMessage(role: "user", content: "Why does this Swift code crash?\n\n```swift\nlet numbers = [1, 2, 3]\nfor i in 0...numbers.count {\n    print(numbers[i])\n}\n```")],
        [ChatMessage(role: "user", content: "Write a Python function that returns the n-th Fibonacci number iteratively.")],
        [
            ChatMessage(role: "system", content: "You are a senior code reviewer. Be concise."),
            ChatMessage(role: "user", content: "Review this function:\n\n```python\ndef average(values):\n    total = 0\n    for v in values:\n        total += v\n    return total / len(values)\n```"),
        ],
        [ChatMessage(role: "user", content: "Convert this JavaScript to TypeScript with types:\n\n```js\nfunction groupBy(items, key) {\n  return items.reduce((acc, item) => {\n    const k = item[key];\n    (acc[k] = acc[k] || []).push(item);\n    return acc;\n  }, {});\n}\n```")],
        [ChatMessage(role: "user", content: "What does this SQL return?\n\n```sql\nSELECT user_id, count(*) AS n\nFROM orders\nWHERE created_at >= now() - interval '7 days'\nGROUP BY user_id\nHAVING count(*) > 3\nORDER BY n DESC\nLIMIT 10;\n```")],
        [ChatMessage(role: "user", content: "Fix the bug:\n\n```go\nfunc sum(xs []int) (total int) {\n\tfor i := 1; i < len(xs); i++ {\n\t\ttotal += xs[i]\n\t}\n\treturn\n}\n```")],
        [ChatMessage(role: "user", content: "Explain this regular expression: `^(?:[a-z0-9!#$%&'*+/=?^_`{|}~-]+(?:\\.[a-z0-9!#$%&'*+/=?^_`{|}~-]+)*)@example\\.com$`")],
        [ChatMessage(role: "user", content: "Add error handling to this Rust code:\n\n```rust\nuse std::fs;\n\nfn main() {\n    let text = fs::read_to_string(\"config.toml\").unwrap();\n    let port: u16 = text.trim().parse().unwrap();\n    println!(\"port = {}\", port);\n}\n```")],
        [ChatMessage(role: "user", content: "Write a unit test for this:\n\n```swift\nstruct Stack<Element> {\n    private var items: [Element] = []\n    mutating func push(_ item: Element) { items.append(item) }\n    mutating func pop() -> Element? { items.popLast() }\n    var isEmpty: Bool { items.isEmpty }\n}\n```")],
        [ChatMessage(role: "user", content: "Make this shell script safer:\n\n```sh\n#!/bin/sh\ncd $1\nrm -rf build/*\nfor f in *.c; do gcc -c $f; done\n```")],
    ]

    /// A Chat Completions body of `messages` for `model`, as a client sends it.
    static func body(_ messages: [ChatMessage], model: String = "chat", stream: Bool = false) -> [JSONKey: JSONValue] {
        let request = ChatCompletionRequest(model: model, messages: messages, stream: stream ? true : nil)
        return (try? JSONValue.parse(Array(JSONEncoder().encode(request))))?.objectValue ?? [:]
    }
}
