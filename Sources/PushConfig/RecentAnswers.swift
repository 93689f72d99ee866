/// The last few answers to a question asked again and again, newest last, the oldest let go
/// once there are `capacity` of them.
///
/// Checking and planning ask the same questions of every account of a file (a template's
/// problems, a URL's host, a headers text's lines), and an account asks about several in turns
/// (its report and its removal): one answer kept was always the other one. Inlinable: asked
/// for every account from other modules, unspecialised it cost more than the answers saved
/// (`callgrind`).
public struct RecentAnswers<Question, Answer> {
    @usableFromInline var entries: [(question: Question, answer: Answer)] = []
    public let capacity: Int

    @inlinable public init(capacity: Int) {
        self.capacity = capacity
    }

    /// The newest answer whose question `matches`.
    @inlinable public func answer(where matches: (Question) -> Bool) -> Answer? {
        entries.last { matches($0.question) }?.answer
    }

    /// Keeps `answer` to `question`, letting the oldest go when full.
    @inlinable public mutating func remember(_ answer: Answer, for question: Question) {
        if entries.count == capacity { entries.removeFirst() }
        entries.append((question, answer))
    }
}

extension RecentAnswers where Question: Equatable {
    /// The newest answer to `question`.
    @inlinable public func answer(to question: Question) -> Answer? {
        answer { $0 == question }
    }
}

extension RecentAnswers: Sendable where Question: Sendable, Answer: Sendable {}
