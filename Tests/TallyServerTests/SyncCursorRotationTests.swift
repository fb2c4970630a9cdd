import Foundation
import TallyAPI
import Testing

@testable import TallyServer

/// Pull cursors are sealed with the token signing keys (``CursorKeys``): a rotation keeps them.
@Suite("Sync cursors across a key rotation", .timeLimit(.minutes(10)))
struct SyncCursorRotationTests {
    @Test("After a key rotation the cursors issued before it still open; without the old key they do not")
    func cursorsAcrossKeyRotation() async throws {
        let old = Secrets.random(bytes: 32)
        let new = Secrets.random(bytes: 32)
        try await LiveServer.with(.sqlite, catalog: SyncFixture.catalog, configure: {
            $0.sync = SyncFixture.sync
            $0.signingKeys = try SigningKeys(parsing: old)
        }) { server in
            let api = server.connection()
            let user = try await api.newGuest()
            #expect(try await api.putDocument(user, "habit_logs", "a", .object(["date": .string("2027-01-15")])).status == .created)
            let cursor = try await api.pull(user).decode(SyncPullResponse.self).cursor
            // A new key signs, the old one still verifies (what restarting with `TALLY_SIGNING_KEY=new,old` does).
            server.services.cursors.install(try SigningKeys(parsing: "\(new),\(old)"))
            #expect(try await api.pull(user, cursor: cursor).status == .ok, "a cursor of the old key was refused")
            let renewed = try await api.pull(user, cursor: cursor).decode(SyncPullResponse.self).cursor
            #expect(renewed != cursor, "the new key does not seal")
            server.services.cursors.install(try SigningKeys(parsing: new))
            #expect(try await api.pull(user, cursor: cursor).status == .badRequest, "the removed key still opens")
            #expect(try await api.pull(user, cursor: renewed).status == .ok)
            await api.close()
        }
    }
}
