/// Takes each account out of a list as it is used, so that a caller that needs an account once
/// (planning at start) lets it go as soon as it is done with it, from several threads at once.
///
/// The accounts are most of what loading holds (about 800 bytes an account with its values);
/// planning 100,000 of them while all were kept put the plans on top of them, the peak of
/// `run --once`. Each index must be taken by one thread only, and at most once; the list must
/// outlive the taker (it is made inside `withUnsafeMutableBufferPointer`).
package struct AccountTaker: @unchecked Sendable {
    private let accounts: UnsafeMutableBufferPointer<Account>

    package init(_ accounts: UnsafeMutableBufferPointer<Account>) {
        self.accounts = accounts
    }

    package var count: Int { accounts.count }

    /// The account at `index`, leaving in its place one that holds nothing.
    package func take(_ index: Int) -> Account {
        precondition(accounts.indices.contains(index), "account \(index) of \(accounts.count)")
        let account = (accounts.baseAddress! + index).move()
        (accounts.baseAddress! + index).initialize(to: Self.taken)
        return account
    }

    /// What a taken account leaves: no values, no services, disabled (nothing allocated).
    private static let taken = Account(id: "", isEnabled: false, values: AccountValueTable(), services: [:],
                                       path: SourcePath(""), position: SourcePosition(line: 0, column: 0), unreadableKeys: [])
}
