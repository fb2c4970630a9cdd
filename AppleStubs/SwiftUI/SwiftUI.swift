// Stub of Apple's SwiftUI, for scripts/apple-typecheck only: the declarations the examples' screens use
// (Examples/*/Sources/*Core/*View.swift), with the signatures, isolation and availability Apple documents: `View` is
// `@MainActor @preconcurrency`, a button's action is `@MainActor`, modifiers are `nonisolated` and take closures that
// run where the view's body runs. Nothing here runs. What it leaves out: the view graph itself (every view's `Body` is
// `Never`), and the overlays SwiftUI re-exports on each platform (UIKit on iOS, AppKit on macOS): a screen that needs
// UIKit imports it under `canImport(UIKit)`, so it builds for macOS too.
@_exported import Foundation

// MARK: - Views and the view builder

/// https://developer.apple.com/documentation/swiftui/view
/// `@MainActor @preconcurrency protocol View` (iOS 13, macOS 10.15): a conformance in a type's declaration makes the
/// type main-actor isolated.
@available(iOS 13.0, macOS 10.15, tvOS 13.0, watchOS 6.0, *)
@MainActor @preconcurrency
public protocol View {
    /// https://developer.apple.com/documentation/swiftui/view/body-swift.associatedtype
    associatedtype Body: View
    /// https://developer.apple.com/documentation/swiftui/view/body-8kl5o
    /// `@ViewBuilder @MainActor @preconcurrency var body: Self.Body { get }`
    @ViewBuilder @MainActor @preconcurrency var body: Self.Body { get }
}

/// https://developer.apple.com/documentation/swift/never (SwiftUI: `extension Never: View`, the body of primitive views)
extension Never: View {
    public typealias Body = Never
    public var body: Never { fatalError("stub") }
}

/// https://developer.apple.com/documentation/swift/optional (SwiftUI: `extension Optional: View where Wrapped: View`,
/// what an `if` without `else` builds)
extension Optional: View where Wrapped: View {
    public typealias Body = Never
    public var body: Never { fatalError("stub") }
}

/// https://developer.apple.com/documentation/swiftui/viewbuilder
/// `@resultBuilder struct ViewBuilder` (iOS 13; the variadic `buildBlock` iOS 17).
@available(iOS 13.0, macOS 10.15, tvOS 13.0, watchOS 6.0, *)
@resultBuilder
public enum ViewBuilder {
    /// https://developer.apple.com/documentation/swiftui/viewbuilder/buildexpression(_:)
    /// `static func buildExpression<Content>(_ content: Content) -> Content where Content : View`
    public static func buildExpression<Content: View>(_ content: Content) -> Content { fatalError("stub") }
    /// https://developer.apple.com/documentation/swiftui/viewbuilder/buildblock()
    /// `static func buildBlock() -> EmptyView`
    public static func buildBlock() -> EmptyView { fatalError("stub") }
    /// https://developer.apple.com/documentation/swiftui/viewbuilder/buildblock(_:)
    /// `static func buildBlock<Content>(_ content: Content) -> Content where Content : View`
    public static func buildBlock<Content: View>(_ content: Content) -> Content { fatalError("stub") }
    /// https://developer.apple.com/documentation/swiftui/viewbuilder/buildblock(_:)-4ng1n (iOS 17)
    /// `static func buildBlock<each Content>(_ content: repeat each Content) -> TupleView<(repeat each Content)>
    ///     where repeat each Content : View`
    @_disfavoredOverload
    public static func buildBlock<each Content: View>(_ content: repeat each Content) -> TupleView<(repeat each Content)> {
        fatalError("stub")
    }
    /// https://developer.apple.com/documentation/swiftui/viewbuilder/buildif(_:)
    /// `static func buildIf<Content>(_ content: Content?) -> Content? where Content : View`
    public static func buildIf<Content: View>(_ content: Content?) -> Content? { fatalError("stub") }
    /// https://developer.apple.com/documentation/swiftui/viewbuilder/buildeither(first:)
    /// `static func buildEither<TrueContent, FalseContent>(first: TrueContent) -> _ConditionalContent<TrueContent,
    ///     FalseContent> where TrueContent : View, FalseContent : View`
    public static func buildEither<TrueContent: View, FalseContent: View>(first: TrueContent)
        -> _ConditionalContent<TrueContent, FalseContent> { fatalError("stub") }
    /// https://developer.apple.com/documentation/swiftui/viewbuilder/buildeither(second:)
    public static func buildEither<TrueContent: View, FalseContent: View>(second: FalseContent)
        -> _ConditionalContent<TrueContent, FalseContent> { fatalError("stub") }
    /// https://developer.apple.com/documentation/swiftui/viewbuilder/buildlimitedavailability(_:)
    /// `static func buildLimitedAvailability<Content>(_ content: Content) -> AnyView where Content : View`
    public static func buildLimitedAvailability<Content: View>(_ content: Content) -> AnyView { fatalError("stub") }
}

/// https://developer.apple.com/documentation/swiftui/tupleview
/// `@frozen struct TupleView<T>`: what a view builder's several statements build.
@available(iOS 13.0, macOS 10.15, tvOS 13.0, watchOS 6.0, *)
@frozen
public struct TupleView<T> {
    /// https://developer.apple.com/documentation/swiftui/tupleview/value
    public var value: T
    /// https://developer.apple.com/documentation/swiftui/tupleview/init(_:)
    public init(_ value: T) { self.value = value }
}

extension TupleView: View {
    public var body: Never { fatalError("stub") }
}

/// https://developer.apple.com/documentation/swiftui/_conditionalcontent
/// `@frozen struct _ConditionalContent<TrueContent, FalseContent>`: what `if`/`else` builds.
@available(iOS 13.0, macOS 10.15, tvOS 13.0, watchOS 6.0, *)
@frozen
public struct _ConditionalContent<TrueContent: View, FalseContent: View> {
}

extension _ConditionalContent: View {
    public var body: Never { fatalError("stub") }
}

/// https://developer.apple.com/documentation/swiftui/emptyview
@available(iOS 13.0, macOS 10.15, tvOS 13.0, watchOS 6.0, *)
@frozen
public struct EmptyView {
    /// https://developer.apple.com/documentation/swiftui/emptyview/init()
    public init() {}
}

extension EmptyView: View {
    public var body: Never { fatalError("stub") }
}

/// https://developer.apple.com/documentation/swiftui/anyview
@available(iOS 13.0, macOS 10.15, tvOS 13.0, watchOS 6.0, *)
@frozen
public struct AnyView {
    /// https://developer.apple.com/documentation/swiftui/anyview/init(_:)-5wbru
    /// `init<V>(_ view: V) where V : View`
    public init<V: View>(_ view: V) {}
}

extension AnyView: View {
    public var body: Never { fatalError("stub") }
}

// MARK: - State, bindings and the environment

/// https://developer.apple.com/documentation/swiftui/dynamicproperty
@available(iOS 13.0, macOS 10.15, tvOS 13.0, watchOS 6.0, *)
public protocol DynamicProperty {}

/// https://developer.apple.com/documentation/swiftui/state
/// `@frozen @propertyWrapper struct State<Value>` (DynamicProperty, Sendable): "You can safely mutate state properties
/// from any thread"; an `@Observable` class in `State` is shared by reference.
@available(iOS 13.0, macOS 10.15, tvOS 13.0, watchOS 6.0, *)
@frozen @propertyWrapper
public struct State<Value>: DynamicProperty, Sendable {
    /// https://developer.apple.com/documentation/swiftui/state/init(wrappedvalue:)
    public init(wrappedValue value: Value) {}
    /// https://developer.apple.com/documentation/swiftui/state/init(initialvalue:)
    public init(initialValue value: Value) {}
    /// https://developer.apple.com/documentation/swiftui/state/wrappedvalue
    /// `var wrappedValue: Value { get nonmutating set }`
    public var wrappedValue: Value {
        get { fatalError("stub") }
        nonmutating set {}
    }
    /// https://developer.apple.com/documentation/swiftui/state/projectedvalue
    /// `var projectedValue: Binding<Value> { get }`
    public var projectedValue: Binding<Value> { fatalError("stub") }
}

/// https://developer.apple.com/documentation/swiftui/binding
/// `@frozen @propertyWrapper @dynamicMemberLookup struct Binding<Value>`
@available(iOS 13.0, macOS 10.15, tvOS 13.0, watchOS 6.0, *)
@frozen @propertyWrapper @dynamicMemberLookup
public struct Binding<Value> {
    /// https://developer.apple.com/documentation/swiftui/binding/init(projectedvalue:)
    /// `init(projectedValue: Binding<Value>)`
    public init(projectedValue: Binding<Value>) {}
    /// https://developer.apple.com/documentation/swiftui/binding/wrappedvalue
    /// `var wrappedValue: Value { get nonmutating set }`
    public var wrappedValue: Value {
        get { fatalError("stub") }
        nonmutating set {}
    }
    /// https://developer.apple.com/documentation/swiftui/binding/projectedvalue
    public var projectedValue: Binding<Value> { fatalError("stub") }
    /// https://developer.apple.com/documentation/swiftui/binding/subscript(dynamicmember:)
    /// `subscript<Subject>(dynamicMember keyPath: WritableKeyPath<Value, Subject>) -> Binding<Subject> { get }`:
    /// `$model.property` for a property of an `@Observable` object held in `State`.
    public subscript<Subject>(dynamicMember keyPath: WritableKeyPath<Value, Subject>) -> Binding<Subject> { fatalError("stub") }
}

/// https://developer.apple.com/documentation/swiftui/environment
/// `@frozen @propertyWrapper struct Environment<Value>` (DynamicProperty, Sendable)
@available(iOS 13.0, macOS 10.15, tvOS 13.0, watchOS 6.0, *)
@frozen @propertyWrapper
public struct Environment<Value>: DynamicProperty, Sendable {
    /// https://developer.apple.com/documentation/swiftui/environment/init(_:)-8slkf
    /// `init(_ keyPath: KeyPath<EnvironmentValues, Value>)`
    public init(_ keyPath: KeyPath<EnvironmentValues, Value>) {}
    /// https://developer.apple.com/documentation/swiftui/environment/wrappedvalue
    /// `var wrappedValue: Value { get }`
    public var wrappedValue: Value { fatalError("stub") }
}

/// https://developer.apple.com/documentation/swiftui/environmentvalues
@available(iOS 13.0, macOS 10.15, tvOS 13.0, watchOS 6.0, *)
public struct EnvironmentValues {
    /// https://developer.apple.com/documentation/swiftui/environmentvalues/init()
    public init() {}
    /// https://developer.apple.com/documentation/swiftui/environmentvalues/scenephase (iOS 14)
    /// `var scenePhase: ScenePhase { get set }`: read in a view, the phase of the scene that contains it.
    @available(iOS 14.0, macOS 11.0, tvOS 14.0, watchOS 7.0, *)
    public var scenePhase: ScenePhase {
        get { fatalError("stub") }
        set {}
    }
}

/// https://developer.apple.com/documentation/swiftui/scenephase
/// `enum ScenePhase` (iOS 14; Comparable, Hashable, Sendable).
@available(iOS 14.0, macOS 11.0, tvOS 14.0, watchOS 7.0, *)
public enum ScenePhase: Comparable, Hashable, Sendable {
    /// https://developer.apple.com/documentation/swiftui/scenephase/background: the scene isn't currently visible in
    /// the UI.
    case background
    /// https://developer.apple.com/documentation/swiftui/scenephase/inactive: the scene is in the foreground but
    /// should pause its work.
    case inactive
    /// https://developer.apple.com/documentation/swiftui/scenephase/active: the scene is in the foreground and
    /// interactive.
    case active
}

// MARK: - Text and localized strings

/// https://developer.apple.com/documentation/swiftui/text
/// `@frozen struct Text` (Equatable, Sendable).
@available(iOS 13.0, macOS 10.15, tvOS 13.0, watchOS 6.0, *)
@frozen
public struct Text: Equatable, Sendable {
    /// https://developer.apple.com/documentation/swiftui/text/init(_:tablename:bundle:comment:)
    /// `init(_ key: LocalizedStringKey, tableName: String? = nil, bundle: Bundle? = nil, comment: StaticString? = nil)`:
    /// what a string literal makes.
    public init(_ key: LocalizedStringKey, tableName: String? = nil, bundle: Bundle? = nil, comment: StaticString? = nil) {}
    /// https://developer.apple.com/documentation/swiftui/text/init(_:)-9d1g4
    /// `@_disfavoredOverload init<S>(_ content: S) where S : StringProtocol`: a string shown as it is (not localized).
    @_disfavoredOverload
    public init<S: StringProtocol>(_ content: S) {}
    /// https://developer.apple.com/documentation/swiftui/text/init(verbatim:)
    public init(verbatim content: String) {}
    /// https://developer.apple.com/documentation/swiftui/text/bold()
    /// `func bold() -> Text`
    public func bold() -> Text { fatalError("stub") }
    public static func == (lhs: Text, rhs: Text) -> Bool { fatalError("stub") }
}

extension Text: View {
    public var body: Never { fatalError("stub") }
}

/// https://developer.apple.com/documentation/swiftui/localizedstringkey
/// `@frozen struct LocalizedStringKey` (Equatable, ExpressibleByStringInterpolation, Sendable): its interpolations take
/// strings, `Text` and the numbers a format specifier can print — not any value, as a `String`'s do.
@available(iOS 13.0, macOS 10.15, tvOS 13.0, watchOS 6.0, *)
@frozen
public struct LocalizedStringKey: Equatable, ExpressibleByStringInterpolation, Sendable {
    /// https://developer.apple.com/documentation/swiftui/localizedstringkey/init(_:)
    public init(_ value: String) {}
    /// https://developer.apple.com/documentation/swiftui/localizedstringkey/init(stringliteral:)
    public init(stringLiteral value: String) {}
    /// https://developer.apple.com/documentation/swiftui/localizedstringkey/init(stringinterpolation:)
    public init(stringInterpolation: LocalizedStringKey.StringInterpolation) {}

    /// https://developer.apple.com/documentation/swiftui/localizedstringkey/stringinterpolation
    @frozen
    public struct StringInterpolation: StringInterpolationProtocol {
        public init(literalCapacity: Int, interpolationCount: Int) {}
        /// https://developer.apple.com/documentation/swiftui/localizedstringkey/stringinterpolation/appendliteral(_:)
        public mutating func appendLiteral(_ literal: String) {}
        /// https://developer.apple.com/documentation/swiftui/localizedstringkey/stringinterpolation/appendinterpolation(_:)-3ohyc
        /// `mutating func appendInterpolation(_ string: String)`
        public mutating func appendInterpolation(_ string: String) {}
        /// https://developer.apple.com/documentation/swiftui/localizedstringkey/stringinterpolation/appendinterpolation(_:)-1pvma
        /// `mutating func appendInterpolation<T>(_ value: T) where T : _FormatSpecifiable`: Int, Int64, Double, …
        public mutating func appendInterpolation<T: _FormatSpecifiable>(_ value: T) {}
        /// https://developer.apple.com/documentation/swiftui/localizedstringkey/stringinterpolation/appendinterpolation(_:)-6vwtt
        /// `mutating func appendInterpolation(_ text: Text)`
        public mutating func appendInterpolation(_ text: Text) {}
    }

    public static func == (lhs: LocalizedStringKey, rhs: LocalizedStringKey) -> Bool { fatalError("stub") }
}

/// SwiftUI's `protocol _FormatSpecifiable: Equatable`: the values `LocalizedStringKey` interpolates with a format
/// specifier (`%lld`, `%lf`, …), the integer and floating-point types.
public protocol _FormatSpecifiable: Equatable {}
extension Int: _FormatSpecifiable {}
extension Int8: _FormatSpecifiable {}
extension Int16: _FormatSpecifiable {}
extension Int32: _FormatSpecifiable {}
extension Int64: _FormatSpecifiable {}
extension UInt: _FormatSpecifiable {}
extension UInt8: _FormatSpecifiable {}
extension UInt16: _FormatSpecifiable {}
extension UInt32: _FormatSpecifiable {}
extension UInt64: _FormatSpecifiable {}
extension Float: _FormatSpecifiable {}
extension Double: _FormatSpecifiable {}

// MARK: - Controls and containers

/// https://developer.apple.com/documentation/swiftui/button
/// `struct Button<Label> where Label : View`
@available(iOS 13.0, macOS 10.15, tvOS 13.0, watchOS 6.0, *)
public struct Button<Label: View> {
    /// https://developer.apple.com/documentation/swiftui/button/init(action:label:)
    /// `@preconcurrency nonisolated init(action: @escaping @MainActor () -> Void, @ViewBuilder label: () -> Label)`
    @preconcurrency
    public nonisolated init(action: @escaping @MainActor () -> Void, @ViewBuilder label: () -> Label) {}
}

extension Button: View {
    public var body: Never { fatalError("stub") }
}

@available(iOS 13.0, macOS 10.15, tvOS 13.0, watchOS 6.0, *)
extension Button where Label == Text {
    /// https://developer.apple.com/documentation/swiftui/button/init(_:action:)
    /// `@preconcurrency nonisolated init(_ titleKey: LocalizedStringKey, action: @escaping @MainActor () -> Void)`
    @preconcurrency
    public nonisolated init(_ titleKey: LocalizedStringKey, action: @escaping @MainActor () -> Void) {}
    /// https://developer.apple.com/documentation/swiftui/button/init(_:action:) (the `StringProtocol` overload)
    /// `@_disfavoredOverload @preconcurrency nonisolated init<S>(_ title: S, action: @escaping @MainActor () -> Void)
    ///     where S : StringProtocol`
    @_disfavoredOverload @preconcurrency
    public nonisolated init<S: StringProtocol>(_ title: S, action: @escaping @MainActor () -> Void) {}
}

/// https://developer.apple.com/documentation/swiftui/textfield
/// `struct TextField<Label> where Label : View`
@available(iOS 13.0, macOS 10.15, tvOS 13.0, watchOS 6.0, *)
public struct TextField<Label: View> {
}

extension TextField: View {
    public var body: Never { fatalError("stub") }
}

@available(iOS 13.0, macOS 10.15, tvOS 13.0, watchOS 6.0, *)
extension TextField where Label == Text {
    /// https://developer.apple.com/documentation/swiftui/textfield/init(_:text:)
    /// `nonisolated init(_ titleKey: LocalizedStringKey, text: Binding<String>)`
    public nonisolated init(_ titleKey: LocalizedStringKey, text: Binding<String>) {}
    /// https://developer.apple.com/documentation/swiftui/textfield/init(_:text:) (the `StringProtocol` overload)
    @_disfavoredOverload
    public nonisolated init<S: StringProtocol>(_ title: S, text: Binding<String>) {}
}

/// https://developer.apple.com/documentation/swiftui/vstack
/// `@frozen struct VStack<Content> where Content : View`
@available(iOS 13.0, macOS 10.15, tvOS 13.0, watchOS 6.0, *)
@frozen
public struct VStack<Content: View> {
    /// https://developer.apple.com/documentation/swiftui/vstack/init(alignment:spacing:content:)
    /// `init(alignment: HorizontalAlignment = .center, spacing: CGFloat? = nil, @ViewBuilder content: () -> Content)`
    public init(alignment: HorizontalAlignment = .center, spacing: CGFloat? = nil, @ViewBuilder content: () -> Content) {}
}

extension VStack: View {
    public var body: Never { fatalError("stub") }
}

/// https://developer.apple.com/documentation/swiftui/hstack
/// `@frozen struct HStack<Content> where Content : View`
@available(iOS 13.0, macOS 10.15, tvOS 13.0, watchOS 6.0, *)
@frozen
public struct HStack<Content: View> {
    /// https://developer.apple.com/documentation/swiftui/hstack/init(alignment:spacing:content:)
    /// `init(alignment: VerticalAlignment = .center, spacing: CGFloat? = nil, @ViewBuilder content: () -> Content)`
    public init(alignment: VerticalAlignment = .center, spacing: CGFloat? = nil, @ViewBuilder content: () -> Content) {}
}

extension HStack: View {
    public var body: Never { fatalError("stub") }
}

/// https://developer.apple.com/documentation/swiftui/spacer
@available(iOS 13.0, macOS 10.15, tvOS 13.0, watchOS 6.0, *)
@frozen
public struct Spacer {
    /// https://developer.apple.com/documentation/swiftui/spacer/init(minlength:)
    /// `init(minLength: CGFloat? = nil)`
    public init(minLength: CGFloat? = nil) {}
}

extension Spacer: View {
    public var body: Never { fatalError("stub") }
}

/// https://developer.apple.com/documentation/swiftui/list
/// `@MainActor @preconcurrency struct List<SelectionValue, Content> where SelectionValue : Hashable, Content : View`
@available(iOS 13.0, macOS 10.15, tvOS 13.0, watchOS 6.0, *)
@MainActor @preconcurrency
public struct List<SelectionValue: Hashable, Content: View>: View {
    public var body: Never { fatalError("stub") }
}

@available(iOS 13.0, macOS 10.15, tvOS 13.0, watchOS 6.0, *)
extension List where SelectionValue == Never {
    /// https://developer.apple.com/documentation/swiftui/list/init(_:rowcontent:) (the collection overload)
    /// `@MainActor @preconcurrency init<Data, RowContent>(_ data: Data, @ViewBuilder rowContent: @escaping
    ///     (Data.Element) -> RowContent) where Content == ForEach<Data, Data.Element.ID, RowContent>,
    ///     Data : RandomAccessCollection, RowContent : View, Data.Element : Identifiable`
    @MainActor @preconcurrency
    public init<Data, RowContent>(_ data: Data, @ViewBuilder rowContent: @escaping (Data.Element) -> RowContent)
    where Content == ForEach<Data, Data.Element.ID, RowContent>, Data: RandomAccessCollection, RowContent: View,
        Data.Element: Identifiable {}

    /// https://developer.apple.com/documentation/swiftui/list/init(_:id:rowcontent:) (the collection overload)
    /// `@MainActor @preconcurrency init<Data, ID, RowContent>(_ data: Data, id: KeyPath<Data.Element, ID>,
    ///     @ViewBuilder rowContent: @escaping (Data.Element) -> RowContent) where Content == ForEach<Data, ID,
    ///     RowContent>, Data : RandomAccessCollection, ID : Hashable, RowContent : View`
    @MainActor @preconcurrency
    public init<Data, ID, RowContent>(
        _ data: Data, id: KeyPath<Data.Element, ID>, @ViewBuilder rowContent: @escaping (Data.Element) -> RowContent
    ) where Content == ForEach<Data, ID, RowContent>, Data: RandomAccessCollection, ID: Hashable, RowContent: View {}
}

/// https://developer.apple.com/documentation/swiftui/foreach
/// `struct ForEach<Data, ID, Content> where Data : RandomAccessCollection, ID : Hashable` (a View where Content : View)
@available(iOS 13.0, macOS 10.15, tvOS 13.0, watchOS 6.0, *)
public struct ForEach<Data: RandomAccessCollection, ID: Hashable, Content> {
    /// https://developer.apple.com/documentation/swiftui/foreach/data
    public var data: Data
    /// https://developer.apple.com/documentation/swiftui/foreach/content
    public var content: (Data.Element) -> Content
}

@available(iOS 13.0, macOS 10.15, tvOS 13.0, watchOS 6.0, *)
extension ForEach: View where Content: View {
    public var body: Never { fatalError("stub") }
}

@available(iOS 13.0, macOS 10.15, tvOS 13.0, watchOS 6.0, *)
extension ForEach where Content: View {
    /// https://developer.apple.com/documentation/swiftui/foreach/init(_:content:)
    /// `init(_ data: Data, @ViewBuilder content: @escaping (Data.Element) -> Content)
    ///     where ID == Data.Element.ID, Data.Element : Identifiable`
    public init(_ data: Data, @ViewBuilder content: @escaping (Data.Element) -> Content)
    where ID == Data.Element.ID, Data.Element: Identifiable { fatalError("stub") }

    /// https://developer.apple.com/documentation/swiftui/foreach/init(_:id:content:)
    /// `init(_ data: Data, id: KeyPath<Data.Element, ID>, @ViewBuilder content: @escaping (Data.Element) -> Content)`
    public init(_ data: Data, id: KeyPath<Data.Element, ID>, @ViewBuilder content: @escaping (Data.Element) -> Content) {
        fatalError("stub")
    }
}

// MARK: - Layout and style values

/// https://developer.apple.com/documentation/swiftui/horizontalalignment
@available(iOS 13.0, macOS 10.15, tvOS 13.0, watchOS 6.0, *)
@frozen
public struct HorizontalAlignment: Equatable, Sendable {
    /// https://developer.apple.com/documentation/swiftui/horizontalalignment/leading
    public static let leading = HorizontalAlignment()
    /// https://developer.apple.com/documentation/swiftui/horizontalalignment/center
    public static let center = HorizontalAlignment()
    /// https://developer.apple.com/documentation/swiftui/horizontalalignment/trailing
    public static let trailing = HorizontalAlignment()
}

/// https://developer.apple.com/documentation/swiftui/verticalalignment
@available(iOS 13.0, macOS 10.15, tvOS 13.0, watchOS 6.0, *)
@frozen
public struct VerticalAlignment: Equatable, Sendable {
    /// https://developer.apple.com/documentation/swiftui/verticalalignment/top
    public static let top = VerticalAlignment()
    /// https://developer.apple.com/documentation/swiftui/verticalalignment/center
    public static let center = VerticalAlignment()
    /// https://developer.apple.com/documentation/swiftui/verticalalignment/bottom
    public static let bottom = VerticalAlignment()
}

/// https://developer.apple.com/documentation/swiftui/alignment
@available(iOS 13.0, macOS 10.15, tvOS 13.0, watchOS 6.0, *)
@frozen
public struct Alignment: Equatable, Sendable {
    /// https://developer.apple.com/documentation/swiftui/alignment/init(horizontal:vertical:)
    public init(horizontal: HorizontalAlignment, vertical: VerticalAlignment) {}
    /// https://developer.apple.com/documentation/swiftui/alignment/center
    public static let center = Alignment(horizontal: .center, vertical: .center)
    /// https://developer.apple.com/documentation/swiftui/alignment/top
    public static let top = Alignment(horizontal: .center, vertical: .top)
    /// https://developer.apple.com/documentation/swiftui/alignment/bottom
    public static let bottom = Alignment(horizontal: .center, vertical: .bottom)
}

/// https://developer.apple.com/documentation/swiftui/font
/// `@frozen struct Font` (Hashable, Sendable).
@available(iOS 13.0, macOS 10.15, tvOS 13.0, watchOS 6.0, *)
@frozen
public struct Font: Hashable, Sendable {
    /// https://developer.apple.com/documentation/swiftui/font/headline
    public static let headline = Font()
    /// https://developer.apple.com/documentation/swiftui/font/body
    public static let body = Font()
    /// https://developer.apple.com/documentation/swiftui/font/footnote
    public static let footnote = Font()
    /// https://developer.apple.com/documentation/swiftui/font/caption
    public static let caption = Font()
}

/// https://developer.apple.com/documentation/swiftui/shapestyle
/// `protocol ShapeStyle : Sendable`
@available(iOS 13.0, macOS 10.15, tvOS 13.0, watchOS 6.0, *)
public protocol ShapeStyle: Sendable {}

/// https://developer.apple.com/documentation/swiftui/color
/// `@frozen struct Color` (Hashable, Sendable; a View and a ShapeStyle).
@available(iOS 13.0, macOS 10.15, tvOS 13.0, watchOS 6.0, *)
@frozen
public struct Color: ShapeStyle, Hashable, Sendable {
    /// https://developer.apple.com/documentation/swiftui/color/red
    public static let red = Color()
    /// https://developer.apple.com/documentation/swiftui/color/secondary
    public static let secondary = Color()
}

extension Color: View {
    public var body: Never { fatalError("stub") }
}

@available(iOS 13.0, macOS 10.15, tvOS 13.0, watchOS 6.0, *)
extension ShapeStyle where Self == Color {
    /// https://developer.apple.com/documentation/swiftui/shapestyle/red (`.foregroundStyle(.red)`)
    public static var red: Color { fatalError("stub") }
}

/// https://developer.apple.com/documentation/swiftui/submittriggers
/// `struct SubmitTriggers` (OptionSet, Sendable; iOS 15).
@available(iOS 15.0, macOS 12.0, tvOS 15.0, watchOS 8.0, *)
public struct SubmitTriggers: OptionSet, Sendable {
    public let rawValue: UInt
    public init(rawValue: UInt) { self.rawValue = rawValue }
    /// https://developer.apple.com/documentation/swiftui/submittriggers/text
    public static let text = SubmitTriggers(rawValue: 1)
    /// https://developer.apple.com/documentation/swiftui/submittriggers/search
    public static let search = SubmitTriggers(rawValue: 2)
}

// MARK: - Transferable (CoreTransferable, which SwiftUI re-exports)

/// https://developer.apple.com/documentation/coretransferable/transferable
/// `protocol Transferable` (iOS 16): declared in CoreTransferable, which `import SwiftUI` brings along; here without
/// its `transferRepresentation` requirement.
@available(iOS 16.0, macOS 13.0, tvOS 16.0, watchOS 9.0, *)
public protocol Transferable {}

/// https://developer.apple.com/documentation/foundation/data (CoreTransferable: `extension Data: Transferable`)
extension Data: Transferable {}

// MARK: - Modifiers

@available(iOS 13.0, macOS 10.15, tvOS 13.0, watchOS 6.0, *)
extension View {
    /// https://developer.apple.com/documentation/swiftui/view/task(priority:_:) (iOS 15)
    /// `nonisolated func task(priority: TaskPriority = .userInitiated, _ action: @escaping () async -> Void)
    ///     -> some View`: the action runs where the body runs (the main actor), cancelled when the view disappears.
    @available(iOS 15.0, macOS 12.0, tvOS 15.0, watchOS 8.0, *)
    public nonisolated func task(priority: TaskPriority = .userInitiated, _ action: @escaping () async -> Void) -> some View {
        fatalError("stub")
    }

    /// https://developer.apple.com/documentation/swiftui/view/onchange(of:initial:_:)-4psgg (iOS 17)
    /// `nonisolated func onChange<V>(of value: V, initial: Bool = false, _ action: @escaping (_ oldValue: V,
    ///     _ newValue: V) -> Void) -> some View where V : Equatable`. (The one-parameter `onChange(of:perform:)` is
    /// deprecated in iOS 17 and not stubbed.)
    @available(iOS 17.0, macOS 14.0, tvOS 17.0, watchOS 10.0, *)
    public nonisolated func onChange<V: Equatable>(
        of value: V, initial: Bool = false, _ action: @escaping (_ oldValue: V, _ newValue: V) -> Void
    ) -> some View { fatalError("stub") }

    /// https://developer.apple.com/documentation/swiftui/view/onsubmit(of:_:) (iOS 15)
    /// `nonisolated func onSubmit(of triggers: SubmitTriggers = .text, _ action: @escaping () -> Void) -> some View`
    @available(iOS 15.0, macOS 12.0, tvOS 15.0, watchOS 8.0, *)
    public nonisolated func onSubmit(of triggers: SubmitTriggers = .text, _ action: @escaping () -> Void) -> some View {
        fatalError("stub")
    }

    /// https://developer.apple.com/documentation/swiftui/view/overlay(alignment:content:) (iOS 15)
    /// `nonisolated func overlay<V>(alignment: Alignment = .center, @ViewBuilder content: () -> V) -> some View
    ///     where V : View`
    @available(iOS 15.0, macOS 12.0, tvOS 15.0, watchOS 8.0, *)
    public nonisolated func overlay<V: View>(alignment: Alignment = .center, @ViewBuilder content: () -> V) -> some View {
        fatalError("stub")
    }

    /// https://developer.apple.com/documentation/swiftui/view/font(_:)
    /// `nonisolated func font(_ font: Font?) -> some View`
    public nonisolated func font(_ font: Font?) -> some View { fatalError("stub") }

    /// https://developer.apple.com/documentation/swiftui/view/foregroundstyle(_:) (iOS 15)
    /// `nonisolated func foregroundStyle<S>(_ style: S) -> some View where S : ShapeStyle`
    @available(iOS 15.0, macOS 12.0, tvOS 15.0, watchOS 8.0, *)
    public nonisolated func foregroundStyle<S: ShapeStyle>(_ style: S) -> some View { fatalError("stub") }

    /// https://developer.apple.com/documentation/swiftui/view/disabled(_:)
    /// `nonisolated func disabled(_ disabled: Bool) -> some View`
    public nonisolated func disabled(_ disabled: Bool) -> some View { fatalError("stub") }

    /// https://developer.apple.com/documentation/swiftui/view/alert(_:ispresented:actions:message:) (iOS 15; the
    /// `Text` title overload)
    /// `nonisolated func alert<A, M>(_ title: Text, isPresented: Binding<Bool>, @ViewBuilder actions: () -> A,
    ///     @ViewBuilder message: () -> M) -> some View where A : View, M : View`
    @available(iOS 15.0, macOS 12.0, tvOS 15.0, watchOS 8.0, *)
    public nonisolated func alert<A: View, M: View>(
        _ title: Text, isPresented: Binding<Bool>, @ViewBuilder actions: () -> A, @ViewBuilder message: () -> M
    ) -> some View { fatalError("stub") }
}

// MARK: Sign in with Apple's button
// Declared by AuthenticationServices' SwiftUI overlay (`_AuthenticationServices_SwiftUI`, which Swift imports when a
// file imports both AuthenticationServices and SwiftUI); declared here, beside the View it is, for the same effect.
import AuthenticationServices

/// https://developer.apple.com/documentation/authenticationservices/signinwithapplebutton (iOS 14, macOS 11)
@available(iOS 14.0, macOS 11.0, tvOS 14.0, watchOS 7.0, *)
@MainActor
public struct SignInWithAppleButton: View {
    /// https://developer.apple.com/documentation/authenticationservices/signinwithapplebutton/label
    public struct Label: Sendable {
        public static let signIn = Label()
        public static let `continue` = Label()
        public static let signUp = Label()
    }

    /// https://developer.apple.com/documentation/authenticationservices/signinwithapplebutton/init(_:onrequest:oncompletion:)
    /// `init(_ label: SignInWithAppleButton.Label = .signIn, onRequest: @escaping (ASAuthorizationAppleIDRequest) -> Void,
    ///     onCompletion: @escaping (Result<ASAuthorization, any Error>) -> Void)`
    public init(
        _ label: SignInWithAppleButton.Label = .signIn, onRequest: @escaping (ASAuthorizationAppleIDRequest) -> Void,
        onCompletion: @escaping (Result<ASAuthorization, any Error>) -> Void
    ) {}

    public var body: Never { fatalError("stub") }
}
