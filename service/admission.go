package service

import (
	"fmt"

	"github.com/nats-io/nats.go"

	"github.com/mafsandbox/engine/messages"
)

// Admission: how many calls the engine handles at once, and for whom. Every call but health
// counts against the engine's bound ([WithMaxInFlight]); on an engine with tenancy each
// account's calls count against the account's bound too ([WithMaxInFlightPerAccount]), so one
// tenant flooding the engine is refused busy at its own bound and the others are still served.
// Health never waits behind the other calls: it has a bound of its own of the same size (and,
// with tenancy, the same per-account bound apart from the account's other calls), so a
// saturated engine still says how it is, to every tenant.

// admitKey is one account's class of calls: health, or the rest.
type admitKey struct {
	account string
	health  bool
}

// admission counts the calls in flight. It is guarded by the Service's mu.
type admission struct {
	maxCalls      int // calls in flight but health's; and health's on their own
	maxPerAccount int // each account's calls of each class; 0: no per-account bound
	calls, health int
	accounts      map[admitKey]int
}

func newAdmission(maxCalls, maxPerAccount int) *admission {
	return &admission{maxCalls: maxCalls, maxPerAccount: maxPerAccount, accounts: map[admitKey]int{}}
}

// admit takes one call of account (health or not) on subject, or says why not: the account is
// at its bound ([*messages.BusyError]), or the engine is ([*messages.EngineUnavailableError]).
// The account's own bound is checked first: a tenant over it is told so, whatever the rest of
// the engine is doing.
func (a *admission) admit(subject, account string, health bool) error {
	k := admitKey{account: account, health: health}
	if a.maxPerAccount > 0 && a.accounts[k] >= a.maxPerAccount {
		return &messages.BusyError{Account: account, Limit: a.maxPerAccount}
	}
	n := &a.calls
	if health {
		n = &a.health
	}
	if *n >= a.maxCalls {
		what := "calls"
		if health {
			what = "health calls"
		}
		return &messages.EngineUnavailableError{Subject: subject, Reason: fmt.Sprintf("the engine is handling its limit of %d %s", a.maxCalls, what)}
	}
	*n++
	if a.maxPerAccount > 0 {
		a.accounts[k]++
	}
	return nil
}

// release gives back what admit took.
func (a *admission) release(account string, health bool) {
	if health {
		a.health--
	} else {
		a.calls--
	}
	if a.maxPerAccount == 0 {
		return
	}
	k := admitKey{account: account, health: health}
	if a.accounts[k]--; a.accounts[k] <= 0 {
		delete(a.accounts, k)
	}
}

// admissionAccount is the account a request counts against, read from the header the NATS
// server set (tenancy.go): "" on an engine without tenancy, and for a request that carries no
// identity (which its check will refuse; such requests share one bound).
func (s *Service) admissionAccount(h nats.Header) string {
	if s.tenancy == nil {
		return ""
	}
	id, err := identityOf(h)
	if err != nil {
		return ""
	}
	return id.Account
}
