#if canImport(SwiftUI)
import SwiftUI

/// The habit tracker's screen on iOS: a row per habit, a cell per day of the week shown, the sync badge.
/// A tap asks for the state opposite to the one the cell shows, so a double tap is one change; a change the device
/// cannot save is shown in an alert (``HabitBoard/failure``). The screen tells the client when the app goes to the
/// background and comes back (`scenePhase`): back in front, it shows what the widget logged meanwhile.
///
/// The app makes the board's client with `HabitTrackerSetup.client(server:appGroup:)` (the session in the Keychain,
/// shared with the widget) and signs in before showing the screen.
public struct HabitBoardView: View {
    @State private var board: HabitBoard
    @Environment(\.scenePhase) private var scenePhase
    private let days: [String]

    /// The screen of `board`, showing `days` (`yyyy-mm-dd`).
    public init(board: HabitBoard, days: [String]) {
        _board = State(initialValue: board)
        self.days = days
    }

    public var body: some View {
        List(board.habits) { habit in
            HStack {
                Text(habit.name)
                Spacer()
                ForEach(days, id: \.self) { day in
                    let done = (try? board.isDone(habit.id, on: day)) ?? false  // a cell the device cannot read: not done
                    Button(done ? "●" : "○") { board.attempt { try board.mark(habit.id, on: day, done: !done) } }
                }
            }
        }
        .overlay(alignment: .bottom) { Text(board.badge).font(.footnote) }
        .alert(Text("Something went wrong"), isPresented: $board.isShowingFailure) {
            Button("OK") {}
        } message: {
            Text(board.failure ?? "")
        }
        .task { await board.follow() }
        .onChange(of: scenePhase) { _, phase in
            switch phase {
            case .active: board.attempt { try board.appDidBecomeActive() }
            case .background: board.appDidEnterBackground()
            default: break  // .inactive: the app switcher, a system alert; still in front
            }
        }
    }
}
#endif
