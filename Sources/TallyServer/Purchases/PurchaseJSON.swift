import TallyAPI

// The answer of `POST /v1/purchases/apple`, written by hand (``JSONWritable``): an app re-submits its unfinished
// transactions at every launch, and `JSONEncoder` was the largest single item of a replay's profile (8 % of the
// server's CPU). Byte for byte what `JSONEncoder` writes, keys sorted and nil fields left out (JSONWriterTests).

extension Purchase: JSONWritable {
    func write(to json: inout JSONWriter) {
        json.string(#"{"environment":"#, environment)
        json.string(#","kind":"#, kind.rawValue)
        json.string(#","originalTransactionId":"#, originalTransactionId)
        if let premiumUntil { json.date(#","premiumUntil":"#, premiumUntil) }
        json.string(#","productId":"#, productId)
        json.date(#","purchasedAt":"#, purchasedAt)
        json.string(#","status":"#, status.rawValue)
        if let tokens { json.int(#","tokens":"#, tokens) }
        json.string(#","transactionId":"#, transactionId)
        json.raw("}")
    }
}

extension PurchaseResponse: JSONWritable {
    func write(to json: inout JSONWriter) {
        json.raw("{")
        if let premiumUntil {
            json.date(#""premiumUntil":"#, premiumUntil)
            json.raw(",")
        }
        json.value(#""purchase":"#, purchase)
        json.value(#","wallet":"#, wallet)
        json.raw("}")
    }
}
