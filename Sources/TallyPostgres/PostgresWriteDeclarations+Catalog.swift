import Foundation
import TallyStore

extension Writes {
    /// Every declaration of ``Writes``, made with placeholder values: what the tests hold the declarations against (which
    /// tables each changes, which caches depend on it, whether each ran). A declaration added to ``Writes`` is added here
    /// too; `PostgresCachePropertyTests` compares this list with the members the declaration files define.
    static var catalog: [PostgresWrite] {
        let p = SQLParam(description: "$1")
        let relation = "SELECT 1"
        return [
            // The ledger and the compare-and-set batch.
            append(from: "b"), remember(from: "k"), rememberAlone(source: relation), ledgerMove(source: relation),
            changeProfile(source: relation, timezone: p, language: p, premiumUntil: p), batchHolds, batchInstallationCounts,
            actionBatch(source: relation, carried: [], holds: nil, installations: nil, holdCheck: "NULL"),
            settleHolds(ids: p, status: p, settledAt: p), expireHolds(source: relation, ids: p, status: p, settledAt: p),
            // Accounts and sessions.
            insertAccount(
                userId: p, deviceHash: p, ipHash: p, appleSubject: p, appleEmail: p, appleRefreshToken: p, appleLinkedAt: p, sessionId: p,
                refreshHash: p, refreshExpiresAt: p, now: p),
            openSession(
                userId: p, deviceHash: p, appleSubject: p, sessionId: p, refreshHash: p, refreshExpiresAt: p, keep: p, now: p),
            rotateRefreshToken(hash: p, nextHash: p, nextExpiresAt: p, now: p), revokeLive(sessions: "true", now: p),
            revokeSession(id: p, now: p),
            linkCredentials(userId: p, email: p, passwordHash: p),
            countSignInFailure(account: p, address: p, failures: p, lastAt: p, lockedUntil: p, total: p, totalLastAt: p),
            clearSignInFailures(account: p, address: p), deleteAccount(id: p),
            // Account codes, Apple identities, the console, merges.
            issueAccountCode(userId: p, purpose: p, hash: p, expiresAt: p, now: p), resetPassword(userId: p, passwordHash: p, now: p),
            verifyEmail(userId: p, now: p), changePassword(userId: p, passwordHash: p, purpose: p, keeping: p, now: p),
            deleteAccountCode(userId: p, purpose: p), countWrongCode(userId: p, purpose: p, failed: p),
            useAppleToken(subject: p, digest: p, expiresAt: p, mergingGuest: p, now: p), touchWallet(userId: p),
            linkApple(userId: p, subject: p, email: p, refreshToken: p, now: p), revokeAppleConsent(subject: p, eventTime: p, now: p),
            purgeAppleRecords(now: p, limit: p), storeAppleContact(subject: p, email: p, refreshToken: p, now: p),
            takeAppleNotice(id: p, keepUntil: p, now: p), unlinkApple(userId: p),
            insertAudit(at: p, operatorSession: p, action: p, userId: p, before: p, after: p, returning: false),
            consoleRevokeSessions(userId: p, at: p, operatorSession: p, action: p, auditUserId: p, before: p, after: p),
            lockSyncState, mergeLedger(source: relation, released: p, status: p, carried: p, guest: p, account: p, settledAt: p),
            mergeAccounts(guest: p, account: p, purchasedPremiumUntil: p, premiumUntil: p, quotas: p, used: p, windowEnds: p),
            mergeDocuments(guest: p, account: p, collections: p, ids: p, data: p, rangeValues: p, hasRanges: p, versions: p, now: p),
            mergeSyncState(userId: p, version: p, purgedThrough: p, documents: p, bytes: p),
            mergeRevoke(guest: p, account: p, summary: p, now: p),
            // Documents.
            documentWriterRead, documentWriterFinish, purgeTombstones(users: p, before: p, limit: p), purgeClients(before: p, limit: p),
            // Purchases, App Attest, consumption requests, maintenance, instances, leases.
            recordPurchaseNotification(uuid: p, type: p, transactionId: p, signedAt: p, now: p), dropUnownedListings(original: p),
            storePurchase(
                transactionId: p, originalTransactionId: p, productId: p, kind: p, quantity: p, tokens: p, environment: p, userId: p,
                claimed: p, purchasedAt: p, revokedAt: p, refundedTokens: p, refunds: p, reversedAt: p, signedAt: p, recordedAt: p,
                consumable: true),
            storeSubscription(
                originalTransactionId: p, transactionId: p, productId: p, environment: p, userId: p, expiresAt: p, graceUntil: p,
                revokedAt: p, revocation: p, signedAt: p),
            purchaseLedger(source: relation, premiums: relation),
            issueAttestationChallenge(hash: p, expiresAt: p), consumeAttestationChallenge(hash: p, now: p),
            purgeAttestationChallenges(now: p),
            saveAttestedKey(
                keyId: p, userId: p, installation: p, publicKey: p, counter: p, environment: p, receipt: p, attestedAt: p),
            advanceAssertionCounter(keyId: p, counter: p), recordUnattestedSpend(userId: p, reason: p, now: p),
            setConsumptionConsent(userId: p, consented: p, now: p),
            queueConsumptionRequest(notificationUUID: p, transactionId: p, environment: p, reason: p, requestedAt: p),
            finishConsumptionAttempt(notificationUUID: p, status: p, answer: p, error: p, next: p, answeredAt: p),
            recordRefundDecision(transactionId: p, decision: p, at: p), createSecret(name: p, value: p),
            purge(idempotencyBefore: p, retention: p, signInFailuresBefore: p, signupsBefore: p),
            purgeExpiredTokens(cutoff: p, limit: p), purgeRevokedSessions(cutoff: p, limit: p),
            deleteStaleInstances(staleBefore: p),
            storeInstance(id: p, host: p, pid: p, signingKeys: p, adminKey: p, startedAt: p, seenAt: p, heartbeat: false),
            leave(id: p), takeLease(name: p, holder: p, until: p, now: p), releaseLease(name: p, holder: p),
        ]
    }
}
