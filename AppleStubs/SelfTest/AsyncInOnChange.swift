// A deliberately wrong call, which scripts/apple-typecheck must refuse: an `await` in the action of SwiftUI's
// `onChange(of:initial:_:)`, which is synchronous (the scene-phase handlers of the examples' screens call the SDK's
// synchronous `appDidBecomeActive()` / `appDidEnterBackground()`; async work goes in a `Task` or in `.task(id:)`).
// expect: to parameter expecting synchronous function type
#if canImport(SwiftUI)
import SwiftUI

@available(iOS 17.0, macOS 14.0, *)
struct SelfTestScenePhase: View {
    @Environment(\.scenePhase) private var scenePhase

    var body: some View {
        Text("Hello").onChange(of: scenePhase) { _, phase in
            await selfTestSave(phase)
        }
    }
}

func selfTestSave(_ phase: ScenePhase) async {}
#endif
