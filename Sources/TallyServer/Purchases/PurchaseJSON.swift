import TallyAPI

// The answer of `POST /v1/purchases/apple`, written by hand (``JSONWritable``): an app re-submits its unfinished
// transactions at every launch, and `JSONEncoder` was the largest single item of a replay's profile (8 % of the
// server's CPU). Byte for byte what `JSONEncoder` writes, keys sorted and nil fields left out (JSONWriterTests).

extension Purchase: JSONWritable {
    func write(to json: inout JSONWriter) {
        json.raw(#"{"environment":"#)
        json.string(environment)
        json.raw(#","kind":"#)
        json.string(kind.rawValue)
        json.raw(#","originalTransactionId":"#)
        json.string(originalTransactionId)
        if let premiumUntil {
            json.raw(#","premiumUntil":"#)
            json.date(premiumUntil)
        }
        json.raw(#","productId":"#)
        json.string(productId)
        json.raw(#","purchasedAt":"#)
        json.date(purchasedAt)
        json.raw(#","status":"#)
        json.string(status.rawValue)
        if let tokens {
            json.raw(#","tokens":"#)
            json.int(tokens)
        }
        json.raw(#","transactionId":"#)
        json.string(transactionId)
        json.raw("}")
    }
}

extension PurchaseResponse: JSONWritable {
    func write(to json: inout JSONWriter) {
        json.raw("{")
        if let premiumUntil {
            json.raw(#""premiumUntil":"#)
            json.date(premiumUntil)
            json.raw(",")
        }
        json.raw(#""purchase":"#)
        purchase.write(to: &json)
        json.raw(#","wallet":"#)
        wallet.write(to: &json)
        json.raw("}")
    }
}
