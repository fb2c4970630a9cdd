// The wire types an app touches (`Wallet`, `Quota`, `ActionResult`, `Hold`, `LedgerEntry`, `Me`, `ErrorCode`)
// come with `import TallyClient`: an app never needs a second import.
@_exported import TallyAPI
