// A deliberately wrong call, which scripts/apple-typecheck must refuse: a main-actor property read from a nonisolated
// function.
// expect: main actor-isolated property 'title' can not be referenced from a nonisolated context
#if canImport(UIKit)
import UIKit

@available(iOS 13.0, *)
func selfTestIsolation(_ scene: UIScene) -> String {
    scene.title
}
#endif
