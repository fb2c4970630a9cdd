// A deliberately wrong call, which scripts/apple-typecheck must refuse: a keychain call given a String for a status.
// expect: cannot convert value of type
#if canImport(Security)
import Security

func selfTestWrongType() -> Bool {
    let status: String = SecItemDelete([:] as CFDictionary)
    return status.isEmpty
}
#endif
