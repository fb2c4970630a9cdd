// Stub of Apple's AuthenticationServices (Sign in with Apple), for scripts/apple-typecheck only: the declarations the
// SDK uses, with the signatures, isolation and availability Apple documents (iOS 18 SDK). Nothing here runs.
@_exported import Foundation
import UIKit

/// https://developer.apple.com/documentation/authenticationservices/aspresentationanchor
/// `typealias ASPresentationAnchor = UIWindow` on iOS, tvOS and visionOS (`NSWindow` on macOS).
public typealias ASPresentationAnchor = UIWindow

/// https://developer.apple.com/documentation/authenticationservices/asauthorizationerror
/// The domain of the sheet's errors, `ASAuthorizationErrorDomain`; `ASAuthorizationError.Code.canceled` is 1001.
public let ASAuthorizationErrorDomain: String = "com.apple.AuthenticationServices.AuthorizationError"

/// https://developer.apple.com/documentation/authenticationservices/asauthorizationerror
@available(iOS 13.0, macOS 10.15, tvOS 13.0, watchOS 6.0, *)
public struct ASAuthorizationError: Error, Hashable, Sendable {
    /// https://developer.apple.com/documentation/authenticationservices/asauthorizationerror/code
    public enum Code: Int, Sendable {
        case unknown = 1000, canceled = 1001, invalidResponse = 1002, notHandled = 1003, failed = 1004, notInteractive = 1005
    }
    public let code: Code
    public static var canceled: Code { .canceled }
}

/// https://developer.apple.com/documentation/authenticationservices/asauthorization/scope
@available(iOS 13.0, macOS 10.15, tvOS 13.0, watchOS 6.0, *)
public struct ASAuthorizationScope: Hashable, RawRepresentable, Sendable {
    public var rawValue: String
    public init(rawValue: String) { self.rawValue = rawValue }
    /// https://developer.apple.com/documentation/authenticationservices/asauthorization/scope/email
    public static let email = ASAuthorizationScope(rawValue: "email")
    /// https://developer.apple.com/documentation/authenticationservices/asauthorization/scope/fullname
    public static let fullName = ASAuthorizationScope(rawValue: "full_name")
}

/// https://developer.apple.com/documentation/authenticationservices/asauthorizationcredential
/// `protocol ASAuthorizationCredential : NSCopying, NSSecureCoding, NSObjectProtocol`.
@available(iOS 13.0, macOS 10.15, tvOS 13.0, watchOS 6.0, *)
public protocol ASAuthorizationCredential: NSObjectProtocol {}

/// https://developer.apple.com/documentation/authenticationservices/asauthorization
@available(iOS 13.0, macOS 10.15, tvOS 13.0, watchOS 6.0, *)
open class ASAuthorization: NSObject {
    /// Scopes (`ASAuthorization.Scope` in Swift).
    public typealias Scope = ASAuthorizationScope
    /// https://developer.apple.com/documentation/authenticationservices/asauthorization/credential
    open var credential: any ASAuthorizationCredential { fatalError("stub") }
    /// https://developer.apple.com/documentation/authenticationservices/asauthorization/provider
    open var provider: any ASAuthorizationProvider { fatalError("stub") }
}

/// https://developer.apple.com/documentation/authenticationservices/asauthorizationappleidcredential
@available(iOS 13.0, macOS 10.15, tvOS 13.0, watchOS 6.0, *)
open class ASAuthorizationAppleIDCredential: NSObject, ASAuthorizationCredential {
    /// https://developer.apple.com/documentation/authenticationservices/asauthorizationappleidcredential/user
    open var user: String { fatalError("stub") }
    /// https://developer.apple.com/documentation/authenticationservices/asauthorizationappleidcredential/identitytoken
    open var identityToken: Data? { fatalError("stub") }
    /// https://developer.apple.com/documentation/authenticationservices/asauthorizationappleidcredential/authorizationcode
    open var authorizationCode: Data? { fatalError("stub") }
    /// https://developer.apple.com/documentation/authenticationservices/asauthorizationappleidcredential/email
    open var email: String? { fatalError("stub") }
}

/// https://developer.apple.com/documentation/authenticationservices/asauthorizationprovider
@available(iOS 13.0, macOS 10.15, tvOS 13.0, watchOS 6.0, *)
public protocol ASAuthorizationProvider: NSObjectProtocol {}

/// https://developer.apple.com/documentation/authenticationservices/asauthorizationrequest
@available(iOS 13.0, macOS 10.15, tvOS 13.0, watchOS 6.0, *)
open class ASAuthorizationRequest: NSObject {}

/// https://developer.apple.com/documentation/authenticationservices/asauthorizationopenidrequest
@available(iOS 13.0, macOS 10.15, tvOS 13.0, watchOS 6.0, *)
open class ASAuthorizationOpenIDRequest: ASAuthorizationRequest {
    /// https://developer.apple.com/documentation/authenticationservices/asauthorizationopenidrequest/requestedscopes
    open var requestedScopes: [ASAuthorization.Scope]?
    /// https://developer.apple.com/documentation/authenticationservices/asauthorizationopenidrequest/nonce
    open var nonce: String?
    /// https://developer.apple.com/documentation/authenticationservices/asauthorizationopenidrequest/state
    open var state: String?
}

/// https://developer.apple.com/documentation/authenticationservices/asauthorizationappleidrequest
@available(iOS 13.0, macOS 10.15, tvOS 13.0, watchOS 6.0, *)
open class ASAuthorizationAppleIDRequest: ASAuthorizationOpenIDRequest {
    /// https://developer.apple.com/documentation/authenticationservices/asauthorizationappleidrequest/user
    open var user: String?
}

/// https://developer.apple.com/documentation/authenticationservices/asauthorizationappleidprovider
@available(iOS 13.0, macOS 10.15, tvOS 13.0, watchOS 6.0, *)
open class ASAuthorizationAppleIDProvider: NSObject, ASAuthorizationProvider {
    public override init() {}
    /// https://developer.apple.com/documentation/authenticationservices/asauthorizationappleidprovider/createrequest()
    open func createRequest() -> ASAuthorizationAppleIDRequest { fatalError("stub") }
}

/// https://developer.apple.com/documentation/authenticationservices/asauthorizationcontrollerdelegate
/// Its methods are main-actor isolated in the iOS 18 SDK (`@MainActor protocol` since Xcode 16).
@available(iOS 13.0, macOS 10.15, tvOS 13.0, watchOS 6.0, *)
@MainActor
public protocol ASAuthorizationControllerDelegate: NSObjectProtocol {
    /// https://developer.apple.com/documentation/authenticationservices/asauthorizationcontrollerdelegate/authorizationcontroller(controller:didcompletewithauthorization:)
    func authorizationController(controller: ASAuthorizationController, didCompleteWithAuthorization authorization: ASAuthorization)
    /// https://developer.apple.com/documentation/authenticationservices/asauthorizationcontrollerdelegate/authorizationcontroller(controller:didcompletewitherror:)
    func authorizationController(controller: ASAuthorizationController, didCompleteWithError error: any Error)
}

/// https://developer.apple.com/documentation/authenticationservices/asauthorizationcontrollerpresentationcontextproviding
@available(iOS 13.0, macOS 10.15, tvOS 13.0, *)
@MainActor
public protocol ASAuthorizationControllerPresentationContextProviding: NSObjectProtocol {
    /// https://developer.apple.com/documentation/authenticationservices/asauthorizationcontrollerpresentationcontextproviding/presentationanchor(for:)
    func presentationAnchor(for controller: ASAuthorizationController) -> ASPresentationAnchor
}

/// https://developer.apple.com/documentation/authenticationservices/asauthorizationcontroller
@available(iOS 13.0, macOS 10.15, tvOS 13.0, watchOS 6.0, *)
@MainActor
open class ASAuthorizationController: NSObject {
    /// https://developer.apple.com/documentation/authenticationservices/asauthorizationcontroller/init(authorizationrequests:)
    public init(authorizationRequests: [ASAuthorizationRequest]) { fatalError("stub") }
    /// https://developer.apple.com/documentation/authenticationservices/asauthorizationcontroller/delegate (weak)
    open weak var delegate: (any ASAuthorizationControllerDelegate)?
    /// https://developer.apple.com/documentation/authenticationservices/asauthorizationcontroller/presentationcontextprovider (weak)
    @available(watchOS, unavailable)
    open weak var presentationContextProvider: (any ASAuthorizationControllerPresentationContextProviding)?
    /// https://developer.apple.com/documentation/authenticationservices/asauthorizationcontroller/performrequests()
    open func performRequests() {}
}
