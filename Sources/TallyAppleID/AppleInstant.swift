import Foundation

/// The times Apple's identity tokens and account notifications may carry (`iat`, `exp`, `event_time`): 2000-01-01 to
/// the end of the year 9999. A claim beyond them (1e300, −2⁶³, a time no clock of Apple's can read) makes the token
/// `malformed`, so no time from a token reaches a conversion that would not hold it.
enum AppleInstant {
    /// The accepted range, in seconds since 1970.
    static let seconds: ClosedRange<Double> = 946_684_800...253_402_300_799.999

    /// The instant `value` seconds after 1970; `malformed`, naming `claim`, beyond ``seconds``.
    static func date(seconds value: Double, claim: String) throws(AppleIDVerificationError) -> Date {
        guard seconds.contains(value) else {
            throw AppleIDVerificationError.malformed("the \(claim) claim is not a time from the year 2000 to 9999")
        }
        return Date(timeIntervalSince1970: value)
    }
}
