// Stub of Apple's UIKit, for scripts/apple-typecheck only: the declarations the SDK and the examples use, with the
// signatures Apple documents. Nothing here runs.
@_exported import Foundation

/// https://developer.apple.com/documentation/uikit/uiresponder
@MainActor
open class UIResponder: NSObject {}

/// https://developer.apple.com/documentation/uikit/uiscene (iOS 13)
@available(iOS 13.0, tvOS 13.0, *)
@MainActor
open class UIScene: UIResponder {
    /// https://developer.apple.com/documentation/uikit/uiscene/title
    open var title: String! { get { fatalError("stub") } set {} }
}

/// https://developer.apple.com/documentation/uikit/uiwindowscene (iOS 13)
@available(iOS 13.0, tvOS 13.0, *)
@MainActor
open class UIWindowScene: UIScene {}

/// https://developer.apple.com/documentation/uikit/uiview
@MainActor
open class UIView: UIResponder {}

/// https://developer.apple.com/documentation/uikit/uiwindow
@MainActor
open class UIWindow: UIView {
    /// https://developer.apple.com/documentation/uikit/uiwindow/init(windowscene:) (iOS 13)
    @available(iOS 13.0, tvOS 13.0, *)
    public init(windowScene: UIWindowScene) { fatalError("stub") }
}
