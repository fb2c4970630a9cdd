// Stub of Apple's PhotosUI, for scripts/apple-typecheck only: the photo picker the examples' screens use, with the
// signatures, Sendable conformances and availability Apple documents. On Apple platforms `PhotosPicker` and
// `PhotosPickerItem` live in PhotosUI's SwiftUI overlay (`_PhotosUI_SwiftUI`), which a file gets by importing both
// PhotosUI and SwiftUI; here PhotosUI imports the SwiftUI stub itself, and a screen still imports both. Nothing here
// runs.
@_exported import Foundation
import SwiftUI

/// https://developer.apple.com/documentation/photosui/phpickerfilter
/// `struct PHPickerFilter` (Equatable, Hashable; iOS 14, macOS 13): which assets the picker shows.
@available(iOS 14.0, macOS 13.0, watchOS 9.0, *)
public struct PHPickerFilter: Equatable, Hashable, Sendable {
    /// https://developer.apple.com/documentation/photosui/phpickerfilter/images
    public static let images = PHPickerFilter()
    /// https://developer.apple.com/documentation/photosui/phpickerfilter/videos
    public static let videos = PHPickerFilter()
    /// https://developer.apple.com/documentation/photosui/phpickerfilter/livephotos
    public static let livePhotos = PHPickerFilter()
}

/// https://developer.apple.com/documentation/photosui/photospickeritem
/// `struct PhotosPickerItem` (Equatable, Hashable, Sendable; iOS 16, macOS 13, watchOS 9): an asset the user picked,
/// loaded on demand.
@available(iOS 16.0, macOS 13.0, watchOS 9.0, *)
public struct PhotosPickerItem: Equatable, Hashable, Sendable {
    /// https://developer.apple.com/documentation/photosui/photospickeritem/encodingdisambiguationpolicy
    /// `struct EncodingDisambiguationPolicy` (Equatable, Hashable, Sendable): which encoding of an asset a load gets.
    public struct EncodingDisambiguationPolicy: Equatable, Hashable, Sendable {
        /// https://developer.apple.com/documentation/photosui/photospickeritem/encodingdisambiguationpolicy/automatic
        public static let automatic = EncodingDisambiguationPolicy()
        /// https://developer.apple.com/documentation/photosui/photospickeritem/encodingdisambiguationpolicy/current
        public static let current = EncodingDisambiguationPolicy()
        /// https://developer.apple.com/documentation/photosui/photospickeritem/encodingdisambiguationpolicy/compatible:
        /// the most compatible encoding (a HEIC photo as JPEG).
        public static let compatible = EncodingDisambiguationPolicy()
    }

    /// https://developer.apple.com/documentation/photosui/photospickeritem/itemidentifier
    /// `let itemIdentifier: String?`
    public let itemIdentifier: String?

    /// https://developer.apple.com/documentation/photosui/photospickeritem/loadtransferable(type:)
    /// `func loadTransferable<T>(type: T.Type) async throws -> T? where T : Transferable`: nil when the item cannot be
    /// represented as `T`.
    public func loadTransferable<T: Transferable>(type: T.Type) async throws -> T? { fatalError("stub") }
}

/// https://developer.apple.com/documentation/photosui/photospicker
/// `struct PhotosPicker<Label> where Label : View` (iOS 16, macOS 13, watchOS 9): a button that shows the photo
/// picker, needing no photo library authorization (the user grants access to what they pick).
@available(iOS 16.0, macOS 13.0, watchOS 9.0, *)
@available(tvOS, unavailable)
public struct PhotosPicker<Label: View> {}

@available(iOS 16.0, macOS 13.0, watchOS 9.0, *)
@available(tvOS, unavailable)
extension PhotosPicker: View {
    public var body: Never { fatalError("stub") }
}

@available(iOS 16.0, macOS 13.0, watchOS 9.0, *)
@available(tvOS, unavailable)
extension PhotosPicker where Label == Text {
    /// https://developer.apple.com/documentation/photosui/photospicker/init(_:selection:matching:preferreditemencoding:)
    /// `nonisolated init(_ titleKey: LocalizedStringKey, selection: Binding<PhotosPickerItem?>,
    ///     matching filter: PHPickerFilter? = nil, preferredItemEncoding: PhotosPickerItem.EncodingDisambiguationPolicy
    ///     = .automatic)`
    public nonisolated init(
        _ titleKey: LocalizedStringKey, selection: Binding<PhotosPickerItem?>, matching filter: PHPickerFilter? = nil,
        preferredItemEncoding: PhotosPickerItem.EncodingDisambiguationPolicy = .automatic
    ) {}
}
