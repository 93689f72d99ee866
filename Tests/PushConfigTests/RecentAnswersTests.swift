import PushConfig
import Testing
import PushTestThreads

@Suite("RecentAnswers: the last few answers, newest first", .blockingThreads)
struct RecentAnswersTests {
    @Test("answers each question kept, the newest when asked twice, and lets the oldest go when full")
    func keepsTheLastFew() {
        var answers = RecentAnswers<String, Int>(capacity: 3)
        #expect(answers.answer(to: "a") == nil)
        answers.remember(1, for: "a")
        answers.remember(2, for: "b")
        answers.remember(3, for: "a")
        #expect(answers.answer(to: "a") == 3 && answers.answer(to: "b") == 2)
        answers.remember(4, for: "c")
        // Full: the oldest ("a" = 1) went; "a" = 3 is still there.
        #expect(answers.answer(to: "a") == 3 && answers.answer(to: "c") == 4)
        answers.remember(5, for: "d")
        #expect(answers.answer(to: "b") == nil && answers.answer(to: "d") == 5)
        #expect(answers.answer { $0.hasPrefix("c") } == 4)
    }
}
