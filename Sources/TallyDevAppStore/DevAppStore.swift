import TallyAppStore

/// `tally dev-appstore`: a local stand-in for the App Store (being built; see issue 33).
public enum DevAppStore {
    /// The environments the stand-in signs for.
    public static let environments: [AppStoreEnvironment] = [.sandbox, .production]
}
