#if canImport(SwiftUI)
import SwiftUI

/// The habit tracker's screen on iOS: a row per habit, a cell per day of the week shown, the sync badge.
/// A tap asks for the state opposite to the one the cell shows, so a double tap is one change.
public struct HabitBoardView: View {
    @State private var board: HabitBoard
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
                    let done = (try? board.isDone(habit.id, on: day)) ?? false
                    Button(done ? "●" : "○") { try? board.mark(habit.id, on: day, done: !done) }
                }
            }
        }
        .overlay(alignment: .bottom) { Text(board.badge).font(.footnote) }
        .task { await board.follow() }
    }
}
#endif
