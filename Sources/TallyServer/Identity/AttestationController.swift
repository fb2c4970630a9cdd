import Foundation
import Hummingbird
import TallyAPI
import TallyStore

/// `POST /v1/auth/attestation/challenge` and `POST /v1/auth/attestation`: App Attest's challenges, and the attestation
/// of a key after sign-in (an account signed in on a new device, an attestation retried later). Both answer 404 when
/// the server does not verify App Attest (no `appAttest:` section, or `mode: off`).
struct AttestationController {
    /// The clock, caller keys and throttles (shared with ``IdentityController``) of the identity routes.
    let admission: Admission
    /// Issues the challenges, verifies and stores the attestations.
    let integrity: DeviceIntegrity

    func addPublicRoutes(to group: RouterGroup<TallyRequestContext>) {
        group.post("auth/attestation/challenge", use: challenge)
    }

    func addRoutes(to group: RouterGroup<AuthenticatedContext>) {
        group.post("auth/attestation", use: attest)
    }

    @Sendable func challenge(_ request: Request, context: TallyRequestContext) async throws -> Response {
        guard integrity.checksAssertions else { throw APIError(.notFound, "This server does not verify App Attest attestations.") }
        let door = admission.door("POST /v1/auth/attestation/challenge", logger: context.logger)
        try admission.throttles.attestationsPerAddress.acquire(admission.keys.clientAddress(request, peer: context.peer), door)
        return JSONResponse.make(body: try await integrity.issueChallenge(), headers: [.cacheControl: "no-store"])
    }

    @Sendable func attest(_ request: Request, context: AuthenticatedContext) async throws -> Response {
        let body = try await JSONBody<AppAttestation>.read(request, context: context).value
        guard integrity.checksAssertions else { throw APIError(.notFound, "This server does not verify App Attest attestations.") }
        let door = admission.door("POST /v1/auth/attestation", logger: context.logger)
        try admission.throttles.attestationsPerAddress.acquire(admission.keys.clientAddress(request, peer: context.peer), door)
        let key = try await integrity.verify(body, logger: context.logger)
        let status = try await integrity.save(key, userId: context.identity.userId, installation: nil)
        return JSONResponse.make(body: status)
    }
}

extension AppAttestation: JSONRequestBody {
    static let integerFields: Set<String> = []
}
