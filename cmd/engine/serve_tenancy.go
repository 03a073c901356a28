package main

import (
	"errors"
	"flag"

	"github.com/mafsandbox/engine/service"
)

// tenancyFlags are serve's tenancy flags (docs/operations.md#tenancy).
type tenancyFlags struct {
	on   bool
	file string
}

func (f *tenancyFlags) register(fs *flag.FlagSet) {
	fs.BoolVar(&f.on, "tenancy", envBool("MAF_SANDBOX_TENANCY"), "serve several tenants: each call is checked against the caller's NATS account, which the server sets on the service import (docs/operations.md#tenancy); without --tenancy-file account X may use scope X (env MAF_SANDBOX_TENANCY=1)")
	fs.StringVar(&f.file, "tenancy-file", envOr("MAF_SANDBOX_TENANCY_FILE", ""), "JSON file of the tenancy mapping: scopes per account, same_name, operators, tool_prefix, stream_prefix; implies --tenancy (env MAF_SANDBOX_TENANCY_FILE)")
}

// errTenancyEmbedded: an embedded server has no accounts, so no call would carry an identity.
var errTenancyEmbedded = errors.New("serve: --tenancy needs a NATS server whose accounts import the API (--nats-url); the embedded server has none, so every call would be refused")

// errTenancyPlacement: a call forwarded between engines would lose the caller's identity.
var errTenancyPlacement = errors.New("serve: --tenancy is not yet supported with --placement")

// option returns the service option of the flags (nil for one tenant) and the mode serve
// logs at start. embedded says serve runs its own NATS server; placement that --placement is on.
func (f *tenancyFlags) option(embedded, placement bool) (service.Option, string, error) {
	if !f.on && f.file == "" {
		return nil, "single tenant: every caller may use every scope", nil
	}
	if embedded {
		return nil, "", errTenancyEmbedded
	}
	if placement {
		return nil, "", errTenancyPlacement
	}
	t := service.DefaultTenancy()
	mode := "tenancy: account X may use scope X"
	if f.file != "" {
		var err error
		if t, err = service.LoadTenancy(f.file); err != nil {
			return nil, "", err
		}
		mode = "tenancy: mapping from " + f.file
	}
	return service.WithTenancy(t), mode, nil
}
