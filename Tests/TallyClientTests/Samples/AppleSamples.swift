// README's Apple-only samples ("Shipping on iOS"), verbatim: SwiftUI and AuthenticationServices do not exist on Linux,
// so this file's body is compiled by scripts/apple-typecheck, against the SDK's Apple layer and the stubs of Apple's
// frameworks (SamplesAreCompiledTests checks that the lines match README's).
#if canImport(SwiftUI) && canImport(AuthenticationServices)
import AuthenticationServices
import SwiftUI
import TallyAPI
import TallyClient

/// README: scenePhase wired to the client, and Sign in with Apple's button.
@available(iOS 17.0, macOS 14.0, *)
struct ShippingOnIOSSamples: View {
    let tally: Client
    @Environment(\.scenePhase) private var scenePhase

    /// The app's question to the user (a sample stand-in).
    func askUser(_ guest: GuestProgress?) async -> Bool { guest != nil }

    var body: some View {
        signInButton
            .onChange(of: scenePhase) { _, phase in
                if phase == .active { tally.appDidBecomeActive() }
                if phase == .background { tally.appDidEnterBackground() }
            }
    }

    @ViewBuilder var signInButton: some View {
        let sheet = AppleSignInSheet()
        SignInWithAppleButton(.signIn) { request in
            sheet.prepare(request)
        } onCompletion: { result in
            Task { try await sheet.complete(result, client: tally, merge: { guest in await askUser(guest) }) }
        }
    }
}
#endif
