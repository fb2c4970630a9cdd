import Crypto
import Foundation
import SwiftASN1
import TallyAppStore
import X509

/// The stand-in's certificate authority: a root, an intermediate with Apple's intermediate extension
/// (1.2.840.113635.100.6.2.1) and a leaf with the receipt-signing extension (1.2.840.113635.100.6.11.1), all P-256,
/// shaped like Apple's chain (the extensions' value is DER NULL, `05 00`). Its root is what a server under test trusts
/// (`rootCertificates: [<dir>/root.der]`); nothing else ever should.
///
/// ``chain(_:)`` also makes the bad chains tests need (``DevSigningDefect``): a leaf or intermediate without its
/// extension, a leaf valid at other times, a chain under another root, two certificates only.
public struct DevCertificateAuthority: Sendable {
    /// The root: self-signed, the trust anchor a server is configured with.
    public let root: Certificate
    /// The intermediate, issued by the root.
    public let intermediate: Certificate
    /// The leaf that signs payloads, issued by the intermediate.
    public let leaf: Certificate
    private let rootKey: P256.Signing.PrivateKey
    private let intermediateKey: P256.Signing.PrivateKey
    private let leafKey: P256.Signing.PrivateKey

    /// The files of a CA directory: the root's DER (what a server names), and each certificate and key.
    public enum File {
        /// The root certificate, DER: give this path to the server's `rootCertificates`.
        public static let root = "root.der"
        static let rootKey = "root-key.pem"
        static let intermediate = "intermediate.der"
        static let intermediateKey = "intermediate-key.pem"
        static let leaf = "leaf.der"
        static let leafKey = "leaf-key.pem"
    }

    /// A new CA whose certificates are valid from a year before `now`: the root for 20 years, the intermediate for
    /// 10, the leaf for 2 (wide, so a test clock standing anywhere near `now` is inside them).
    public static func generate(now: Date) throws -> DevCertificateAuthority {
        let rootKey = P256.Signing.PrivateKey()
        let root = try makeRoot(key: .init(rootKey), now: now, name: "Tally Dev App Store Root CA")
        let intermediateKey = P256.Signing.PrivateKey()
        let intermediate = try appStoreIntermediate(key: intermediateKey, issuer: root, issuerKey: rootKey, now: now, appleOID: true)
        let leafKey = P256.Signing.PrivateKey()
        let leaf = try makeLeaf(
            key: leafKey, issuer: intermediate, issuerKey: intermediateKey, notBefore: now.addingTimeInterval(-year),
            notAfter: now.addingTimeInterval(2 * year), appleOID: true)
        return DevCertificateAuthority(
            root: root, intermediate: intermediate, leaf: leaf, rootKey: rootKey, intermediateKey: intermediateKey, leafKey: leafKey)
    }

    /// The CA kept in `directory`: loaded when `root.der` is there (a leaf no longer valid at `now` is replaced by a new
    /// one from the same intermediate, and written), else generated and written (keys readable by the owner only).
    /// A directory with some of the files but not all is an error, never silently replaced: a server may trust its root.
    public static func loadOrGenerate(directory: URL, now: Date) throws -> DevCertificateAuthority {
        let fileManager = FileManager.default
        let rootPath = directory.appendingPathComponent(File.root).path
        guard fileManager.fileExists(atPath: rootPath) else {
            let authority = try generate(now: now)
            try authority.write(to: directory)
            return authority
        }
        func certificate(_ name: String) throws -> Certificate {
            try Certificate(derEncoded: Array(try Data(contentsOf: directory.appendingPathComponent(name))))
        }
        func key(_ name: String) throws -> P256.Signing.PrivateKey {
            try P256.Signing.PrivateKey(pemRepresentation: try String(contentsOf: directory.appendingPathComponent(name), encoding: .utf8))
        }
        var authority = DevCertificateAuthority(
            root: try certificate(File.root), intermediate: try certificate(File.intermediate), leaf: try certificate(File.leaf),
            rootKey: try key(File.rootKey), intermediateKey: try key(File.intermediateKey), leafKey: try key(File.leafKey))
        if !AppStoreChainRules.isValid(authority.leaf, at: now) {
            let leafKey = P256.Signing.PrivateKey()
            let leaf = try makeLeaf(
                key: leafKey, issuer: authority.intermediate, issuerKey: authority.intermediateKey,
                notBefore: now.addingTimeInterval(-year), notAfter: now.addingTimeInterval(2 * year), appleOID: true)
            authority = DevCertificateAuthority(
                root: authority.root, intermediate: authority.intermediate, leaf: leaf, rootKey: authority.rootKey,
                intermediateKey: authority.intermediateKey, leafKey: leafKey)
            try authority.write(to: directory)
        }
        return authority
    }

    /// Writes the certificates (DER) and keys (PEM, mode 0600) to `directory`, creating it.
    public func write(to directory: URL) throws {
        let fileManager = FileManager.default
        try fileManager.createDirectory(at: directory, withIntermediateDirectories: true)
        for (name, certificate) in [(File.root, root), (File.intermediate, intermediate), (File.leaf, leaf)] {
            try Data(try Self.der(certificate)).write(to: directory.appendingPathComponent(name), options: .atomic)
        }
        for (name, key) in [(File.rootKey, rootKey), (File.intermediateKey, intermediateKey), (File.leafKey, leafKey)] {
            let url = directory.appendingPathComponent(name)
            try Data(key.pemRepresentation.utf8).write(to: url, options: .atomic)
            try fileManager.setAttributes([.posixPermissions: 0o600], ofItemAtPath: url.path)
        }
    }

    /// The root certificate's DER bytes (what a server's `rootCertificates` holds).
    public var rootDER: [UInt8] { (try? Self.der(root)) ?? [] }

    /// The certificates and key that sign a payload: `x5c` is `certificates` in order, `key` the leaf's.
    public struct SigningChain: Sendable {
        /// The `x5c` certificates: leaf first.
        public let certificates: [Certificate]
        /// The leaf's private key.
        public let key: P256.Signing.PrivateKey
        /// A chain of `certificates` signed with `key` (tests assemble chains of their own with it).
        public init(certificates: [Certificate], key: P256.Signing.PrivateKey) {
            self.certificates = certificates
            self.key = key
        }
    }

    /// The chain to sign with: [leaf, intermediate, root] as Apple sends it, or the bad chain `defect` asks for
    /// (new certificates are made for it; the CA's own stay as they are). A defect that is not about the chain
    /// (``DevSigningDefect/algorithm(_:)``, ``DevSigningDefect/tamperedPayload``) gets the good chain.
    public func chain(_ defect: DevSigningDefect? = nil) throws -> SigningChain {
        let good = SigningChain(certificates: [leaf, intermediate, root], key: leafKey)
        switch defect {
        case nil, .algorithm?, .tamperedPayload?:
            return good
        case .twoCertificates?:
            return SigningChain(certificates: [leaf, intermediate], key: leafKey)
        case .leafWithoutAppleOID?:
            let key = P256.Signing.PrivateKey()
            let leaf = try Self.makeLeaf(
                key: key, issuer: intermediate, issuerKey: intermediateKey, notBefore: self.leaf.notValidBefore,
                notAfter: self.leaf.notValidAfter, appleOID: false)
            return SigningChain(certificates: [leaf, intermediate, root], key: key)
        case .intermediateWithoutAppleOID?:
            let now = intermediate.notValidBefore.addingTimeInterval(Self.year)
            let otherKey = P256.Signing.PrivateKey()
            let other = try Self.appStoreIntermediate(key: otherKey, issuer: root, issuerKey: rootKey, now: now, appleOID: false)
            let key = P256.Signing.PrivateKey()
            let leaf = try Self.makeLeaf(
                key: key, issuer: other, issuerKey: otherKey, notBefore: self.leaf.notValidBefore, notAfter: self.leaf.notValidAfter,
                appleOID: true)
            return SigningChain(certificates: [leaf, other, root], key: key)
        case .leafValidity(let notBefore, let notAfter)?:
            let key = P256.Signing.PrivateKey()
            let leaf = try Self.makeLeaf(
                key: key, issuer: intermediate, issuerKey: intermediateKey, notBefore: notBefore, notAfter: notAfter, appleOID: true)
            return SigningChain(certificates: [leaf, intermediate, root], key: key)
        case .otherRoot?:
            let other = try Self.generate(now: intermediate.notValidBefore.addingTimeInterval(Self.year))
            return try other.chain()
        }
    }

    // MARK: Making certificates

    /// A year, in seconds: the unit of the stand-ins' validity periods.
    static let year: TimeInterval = 365 * 24 * 3600

    /// A stand-in certificate's name: `commonName` (and the unit, if any), of the organization "Tally (development
    /// stand-in, not Apple)", in the US.
    static func name(_ commonName: String, unit: String? = nil) throws -> DistinguishedName {
        try DistinguishedName {
            CommonName(commonName)
            if let unit { OrganizationalUnitName(unit) }
            OrganizationName("Tally (development stand-in, not Apple)")
            CountryName("US")
        }
    }

    /// Apple's extensions as Apple writes them: non-critical, the value DER NULL.
    private static func appleExtension(_ oid: ASN1ObjectIdentifier) -> Certificate.Extension {
        Certificate.Extension(oid: oid, critical: false, value: [0x05, 0x00])
    }

    /// A self-signed root CA certificate named `commonName` for `key`, valid from a year before `now` for 20 years (the
    /// stand-ins' roots: this one's, P-256, and App Attest's, P-384 signed with `ecdsaWithSHA384`).
    static func makeRoot(
        key: Certificate.PrivateKey, now: Date, name commonName: String, signatureAlgorithm: Certificate.SignatureAlgorithm = .ecdsaWithSHA256
    ) throws -> Certificate {
        let publicKey = key.publicKey
        let name = try name(commonName)
        return try Certificate(
            version: .v3, serialNumber: .init(), publicKey: publicKey, notValidBefore: now.addingTimeInterval(-year),
            notValidAfter: now.addingTimeInterval(20 * year), issuer: name, subject: name, signatureAlgorithm: signatureAlgorithm,
            extensions: try Certificate.Extensions {
                Critical(BasicConstraints.isCertificateAuthority(maxPathLength: nil))
                Critical(KeyUsage(keyCertSign: true, cRLSign: true))
                SubjectKeyIdentifier(hash: publicKey)
            },
            issuerPrivateKey: key)
    }

    /// An intermediate CA certificate (path length 0) named `commonName` for `publicKey`, issued by `issuer` with
    /// `issuerKey`, valid from a year before `now` for 10 years; with `appleOID`, Apple's intermediate extension.
    static func makeIntermediate(
        publicKey: Certificate.PublicKey, name commonName: String, issuer: Certificate, issuerKey: Certificate.PrivateKey, now: Date,
        signatureAlgorithm: Certificate.SignatureAlgorithm = .ecdsaWithSHA256, appleOID: Bool = false
    ) throws -> Certificate {
        var extensions = try Certificate.Extensions {
            Critical(BasicConstraints.isCertificateAuthority(maxPathLength: 0))
            Critical(KeyUsage(keyCertSign: true, cRLSign: true))
            SubjectKeyIdentifier(hash: publicKey)
            AuthorityKeyIdentifier(keyIdentifier: try issuer.extensions.subjectKeyIdentifier?.keyIdentifier)
        }
        if appleOID { try extensions.append(appleExtension(AppStoreChainRules.intermediateOID)) }
        return try Certificate(
            version: .v3, serialNumber: .init(), publicKey: publicKey, notValidBefore: now.addingTimeInterval(-year),
            notValidAfter: now.addingTimeInterval(10 * year), issuer: issuer.subject, subject: try name(commonName),
            signatureAlgorithm: signatureAlgorithm, extensions: extensions, issuerPrivateKey: issuerKey)
    }

    /// This authority's intermediate for `key`, with Apple's extension or (a bad chain's) without it.
    private static func appStoreIntermediate(
        key: P256.Signing.PrivateKey, issuer: Certificate, issuerKey: P256.Signing.PrivateKey, now: Date, appleOID: Bool
    ) throws -> Certificate {
        try makeIntermediate(
            publicKey: Certificate.PublicKey(key.publicKey),
            name: appleOID ? "Tally Dev App Store Intermediate" : "Tally Dev App Store Intermediate (no Apple extension)", issuer: issuer,
            issuerKey: .init(issuerKey), now: now, appleOID: appleOID)
    }

    private static func makeLeaf(
        key: P256.Signing.PrivateKey, issuer: Certificate, issuerKey: P256.Signing.PrivateKey, notBefore: Date, notAfter: Date,
        appleOID: Bool
    ) throws -> Certificate {
        let publicKey = Certificate.PublicKey(key.publicKey)
        var extensions = try Certificate.Extensions {
            Critical(BasicConstraints.notCertificateAuthority)
            Critical(KeyUsage(digitalSignature: true))
            SubjectKeyIdentifier(hash: publicKey)
            AuthorityKeyIdentifier(keyIdentifier: try issuer.extensions.subjectKeyIdentifier?.keyIdentifier)
        }
        if appleOID { try extensions.append(appleExtension(AppStoreChainRules.leafOID)) }
        return try Certificate(
            version: .v3, serialNumber: .init(), publicKey: publicKey, notValidBefore: notBefore, notValidAfter: notAfter,
            issuer: issuer.subject,
            subject: try name(appleOID ? "Tally Dev App Store Receipt Signing" : "Tally Dev App Store Leaf (no Apple extension)"),
            signatureAlgorithm: .ecdsaWithSHA256, extensions: extensions, issuerPrivateKey: .init(issuerKey))
    }

    /// A certificate's DER bytes.
    static func der(_ certificate: Certificate) throws -> [UInt8] {
        var serializer = DER.Serializer()
        try serializer.serialize(certificate)
        return serializer.serializedBytes
    }
}
