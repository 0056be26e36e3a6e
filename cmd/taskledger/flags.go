package main

import (
	"encoding/hex"
	"fmt"
	"os"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/spf13/pflag"

	"taskledger/commands"
	"taskledger/internal/cli"
	"taskledger/projections"
)

// envFlags are the flag names that have an environment fallback (every
// flag registered with envDefault).
var (
	envMu    sync.Mutex
	envFlags = map[string]bool{}
)

func envName(flagName string) string {
	return "TASKLEDGER_" + strings.ToUpper(strings.ReplaceAll(flagName, "-", "_"))
}

// envDefault returns TASKLEDGER_<NAME> or def.
func envDefault(name, def string) string {
	envMu.Lock()
	envFlags[name] = true
	envMu.Unlock()
	if v, ok := os.LookupEnv(envName(name)); ok {
		return v
	}
	return def
}

// withEnv records on fs that flag name honours the environment variable
// env, shown in its help line.
func withEnv(fs *pflag.FlagSet, name, env string) { cli.WithEnv(fs, name, env) }

// envStringVar defines a string flag whose default is TASKLEDGER_<NAME>
// when set, else def.
func envStringVar(fs *pflag.FlagSet, p *string, name, def, usage string) {
	fs.StringVar(p, name, envDefault(name, def), usage)
	withEnv(fs, name, envName(name))
}

// envString is envStringVar returning the value's address.
func envString(fs *pflag.FlagSet, name, def, usage string) *string {
	p := new(string)
	envStringVar(fs, p, name, def, usage)
	return p
}

// serveFlags are the settings of `serve` with their environment fallbacks.
type serveFlags struct {
	data, listen, clock                         string
	claimLease, runningLease, presenceTTL       string
	authMin, authMax, retention, requiredChecks string
	snapshotEvery, claimSecret, logLevel        string
	metricsListen                               string
	defaultTakeover                             string
	net                                         netFlags
	cluster                                     clusterFlags
	backup                                      backupFlags
}

// netFlags are the network settings of `serve`: TLS, timeouts, connection
// and rate limits.
type netFlags struct {
	tlsCert, tlsKey, insecureHTTP                      string
	readHeaderTimeout, readTimeout, writeTimeout, idle string
	maxHeaderBytes, maxConnections                     string
	deviceRate, deviceBurst, addressRate, addressBurst string
	deviceUploadInflight                               string
}

func (f *netFlags) register(fs *pflag.FlagSet) {
	str := func(p *string, name, def, usage string) { envStringVar(fs, p, name, def, usage) }
	str(&f.tlsCert, "tls-cert", "", "TLS certificate chain (PEM); with --tls-key, serve HTTPS (TLS 1.2+), reloaded on SIGHUP")
	str(&f.tlsKey, "tls-key", "", "TLS private key (PEM)")
	f.insecureHTTP = envDefault("insecure-http", "false")
	fs.Var((*boolText)(&f.insecureHTTP), "insecure-http", "serve plain HTTP on a non-loopback address (behind a TLS-terminating proxy)")
	fs.Lookup("insecure-http").NoOptDefVal = "true"
	fs.Lookup("insecure-http").DefValue = "false"
	withEnv(fs, "insecure-http", envName("insecure-http"))
	str(&f.readHeaderTimeout, "read-header-timeout", "10s", "time to read a request's headers (1s–5m)")
	str(&f.readTimeout, "read-timeout", "60s", "time to read a whole request, body included (1s–30m)")
	str(&f.writeTimeout, "write-timeout", "60s", "time to write an answer (1s–30m)")
	str(&f.idle, "idle-timeout", "60s", "keep-alive idle time (1s–30m)")
	str(&f.maxHeaderBytes, "max-header-bytes", "16384", "request header size limit in bytes (4096–1048576)")
	str(&f.maxConnections, "max-connections", "4096", "concurrent connections (1–1000000)")
	str(&f.deviceRate, "device-rate", "20/s", "requests per device (N/s, N/m or N/h; 0 = off)")
	str(&f.deviceBurst, "device-burst", "40", "burst of the per-device rate (1–100000)")
	str(&f.addressRate, "address-rate", "5/s", "unauthenticated requests per remote address (N/s, N/m or N/h; 0 = off)")
	str(&f.addressBurst, "address-burst", "20", "burst of the per-address rate (1–100000)")
	str(&f.deviceUploadInflight, "device-upload-inflight", "16MiB", "evidence upload bytes each device may have in flight (8MiB–1GiB; bytes, or KiB/MiB/GiB)")
}

// netConfig is the validated network configuration.
type netConfig struct {
	tlsCert, tlsKey                              string
	insecureHTTP                                 bool
	readHeaderTimeout, readTimeout, writeTimeout time.Duration
	idleTimeout                                  time.Duration
	maxHeaderBytes, maxConnections               int
	deviceRate, addressRate                      float64
	deviceBurst, addressBurst                    int
	deviceUploadInflight                         int64
}

func (f *netFlags) config(listen string) (netConfig, error) {
	var c netConfig
	var err error
	c.tlsCert, c.tlsKey = f.tlsCert, f.tlsKey
	if (c.tlsCert == "") != (c.tlsKey == "") {
		return c, fmt.Errorf("--tls-cert and --tls-key (TASKLEDGER_TLS_CERT, TASKLEDGER_TLS_KEY) go together: give both or neither")
	}
	if c.insecureHTTP, err = strconv.ParseBool(f.insecureHTTP); err != nil {
		return c, fmt.Errorf("--insecure-http: %q is not true or false", f.insecureHTTP)
	}
	if c.tlsCert == "" && !c.insecureHTTP && !loopback(listen) {
		return c, fmt.Errorf("--listen %s is not a loopback address: serve HTTPS with --tls-cert and --tls-key, "+
			"or give --insecure-http when a TLS-terminating proxy stands in front", listen)
	}
	if c.tlsCert != "" && c.insecureHTTP {
		return c, fmt.Errorf("--insecure-http and --tls-cert exclude each other")
	}
	if c.readHeaderTimeout, err = duration("read-header-timeout", f.readHeaderTimeout, time.Second, 5*time.Minute); err != nil {
		return c, err
	}
	if c.readTimeout, err = duration("read-timeout", f.readTimeout, time.Second, 30*time.Minute); err != nil {
		return c, err
	}
	if c.writeTimeout, err = duration("write-timeout", f.writeTimeout, time.Second, 30*time.Minute); err != nil {
		return c, err
	}
	if c.idleTimeout, err = duration("idle-timeout", f.idle, time.Second, 30*time.Minute); err != nil {
		return c, err
	}
	if c.maxHeaderBytes, err = intFlag("max-header-bytes", f.maxHeaderBytes, 4096, 1<<20); err != nil {
		return c, err
	}
	if c.maxConnections, err = intFlag("max-connections", f.maxConnections, 1, 1_000_000); err != nil {
		return c, err
	}
	if c.deviceRate, err = rateFlag("device-rate", f.deviceRate); err != nil {
		return c, err
	}
	if c.deviceBurst, err = intFlag("device-burst", f.deviceBurst, 1, 100_000); err != nil {
		return c, err
	}
	if c.addressRate, err = rateFlag("address-rate", f.addressRate); err != nil {
		return c, err
	}
	if c.addressBurst, err = intFlag("address-burst", f.addressBurst, 1, 100_000); err != nil {
		return c, err
	}
	if c.deviceUploadInflight, err = sizeFlag("device-upload-inflight", f.deviceUploadInflight, 8<<20, 1<<30); err != nil {
		return c, err
	}
	return c, nil
}

// boolText is a boolean flag kept as text (validated with the others).
type boolText string

func (b *boolText) String() string     { return string(*b) }
func (b *boolText) Set(v string) error { *b = boolText(v); return nil }
func (b *boolText) Type() string       { return "bool" }

func intFlag(name, v string, lo, hi int) (int, error) {
	n, err := strconv.Atoi(v)
	if err != nil || n < lo || n > hi {
		return 0, fmt.Errorf("--%s: %q is outside its bounds %d – %d", name, v, lo, hi)
	}
	return n, nil
}

// sizeFlag parses a size in bytes, or with a KiB, MiB or GiB suffix,
// within lo – hi bytes.
func sizeFlag(name, v string, lo, hi int64) (int64, error) {
	num, mult := v, int64(1)
	for suffix, m := range map[string]int64{"KiB": 1 << 10, "MiB": 1 << 20, "GiB": 1 << 30} {
		if strings.HasSuffix(v, suffix) {
			num, mult = strings.TrimSuffix(v, suffix), m
		}
	}
	n, err := strconv.ParseInt(num, 10, 64)
	if err != nil || n < 0 || n > hi/mult || n*mult < lo {
		return 0, fmt.Errorf("--%s: %q is outside its bounds 8MiB – 1GiB (a size in bytes, or with KiB, MiB, GiB)", name, v)
	}
	return n * mult, nil
}

// rateFlag parses N/s, N/m, N/h (or N, per second) into requests per
// second; 0 turns the limit off.
func rateFlag(name, v string) (float64, error) {
	num, unit, ok := strings.Cut(v, "/")
	per := 1.0
	if ok {
		switch unit {
		case "s":
		case "m":
			per = 60
		case "h":
			per = 3600
		default:
			ok = false
		}
	} else {
		ok = true
	}
	n, err := strconv.ParseFloat(num, 64)
	if !ok || err != nil || n < 0 || n > 1_000_000 || n != n {
		return 0, fmt.Errorf("--%s: %q is not a rate such as 20/s, 600/m or 0 (off)", name, v)
	}
	return n / per, nil
}

func (f *serveFlags) register(fs *pflag.FlagSet) {
	str := func(p *string, name, def, usage string) { envStringVar(fs, p, name, def, usage) }
	str(&f.data, "data", "./data", "data directory")
	str(&f.listen, "listen", "127.0.0.1:8080", "listen address")
	str(&f.clock, "clock", "wall", "clock: wall or manual (tests; loopback only)")
	str(&f.claimLease, "claim-lease", "10m", "claim lease (1m–60m, < --authorization-ttl-min)")
	str(&f.runningLease, "running-lease", "90s", "running lease (30s–10m)")
	str(&f.presenceTTL, "presence-ttl", "2m", "presence TTL (30s–10m)")
	str(&f.authMin, "authorization-ttl-min", "15m", "minimum authorization TTL (15m–720h)")
	str(&f.authMax, "authorization-ttl-max", "720h", "maximum authorization TTL (15m–720h)")
	str(&f.retention, "idempotency-retention", "72h", "idempotency record retention (1h–720h, longer than every lease)")
	str(&f.requiredChecks, "required-checks", "accessibility_connected,target_app_installed", "default readiness checks (0–16 names)")
	str(&f.snapshotEvery, "snapshot-every", "100000", "events between snapshots (1000–10000000)")
	str(&f.claimSecret, "claim-token-secret", "", "claim-token secret: 64 lowercase hex (enables server-issued claim tokens)")
	str(&f.logLevel, "log-level", "info", "log level: debug, info, warn, error")
	str(&f.metricsListen, "metrics-listen", "", "serve GET /metrics on this address only (plain HTTP, no token), no longer on --listen; empty: on --listen")

	str(&f.defaultTakeover, "default-takeover", "reclaim", "takeover policy of an authorization that names none: reclaim or manual")
	f.net.register(fs)
	f.cluster.register(fs)
	f.backup.register(fs)
}

func duration(name, v string, lo, hi time.Duration) (time.Duration, error) {
	d, err := time.ParseDuration(v)
	if err != nil {
		return 0, fmt.Errorf("--%s: %q is not a duration (use Go syntax such as 90s, 10m, 24h)", name, v)
	}
	if d < lo || d > hi {
		return 0, fmt.Errorf("--%s: %s is outside its bounds %s – %s", name, d, lo, hi)
	}
	return d, nil
}

var checkNameRE = regexp.MustCompile(`^[a-z0-9_]{1,32}$`)

var secretRE = regexp.MustCompile(`^[0-9a-f]{64}$`)

// config validates the flags into the commands configuration.
func (f *serveFlags) config() (commands.Config, uint64, error) {
	var c commands.Config
	var err error
	if c.ClaimLease, err = duration("claim-lease", f.claimLease, time.Minute, time.Hour); err != nil {
		return c, 0, err
	}
	if c.RunningLease, err = duration("running-lease", f.runningLease, 30*time.Second, 10*time.Minute); err != nil {
		return c, 0, err
	}
	if c.PresenceTTL, err = duration("presence-ttl", f.presenceTTL, 30*time.Second, 10*time.Minute); err != nil {
		return c, 0, err
	}
	if c.AuthTTLMin, err = duration("authorization-ttl-min", f.authMin, 15*time.Minute, 720*time.Hour); err != nil {
		return c, 0, err
	}
	if c.AuthTTLMax, err = duration("authorization-ttl-max", f.authMax, 15*time.Minute, 720*time.Hour); err != nil {
		return c, 0, err
	}
	if c.AuthTTLMin > c.AuthTTLMax {
		return c, 0, fmt.Errorf("--authorization-ttl-min (%s) must not exceed --authorization-ttl-max (%s)", c.AuthTTLMin, c.AuthTTLMax)
	}
	if c.ClaimLease >= c.AuthTTLMin {
		return c, 0, fmt.Errorf("--claim-lease (%s) must be strictly shorter than --authorization-ttl-min (%s)", c.ClaimLease, c.AuthTTLMin)
	}
	if c.IdempotencyRetention, err = duration("idempotency-retention", f.retention, time.Hour, 720*time.Hour); err != nil {
		return c, 0, err
	}
	if c.IdempotencyRetention <= max(c.ClaimLease, c.RunningLease, c.PresenceTTL) {
		return c, 0, fmt.Errorf("--idempotency-retention (%s) must be longer than every lease", c.IdempotencyRetention)
	}
	c.RequiredChecks = []string{}
	if strings.TrimSpace(f.requiredChecks) != "" {
		for _, n := range strings.Split(f.requiredChecks, ",") {
			n = strings.TrimSpace(n)
			if !checkNameRE.MatchString(n) {
				return c, 0, fmt.Errorf("--required-checks: %q is not a check name ([a-z0-9_]{1,32})", n)
			}
			c.RequiredChecks = append(c.RequiredChecks, n)
		}
	}
	if len(c.RequiredChecks) > 16 {
		return c, 0, fmt.Errorf("--required-checks: at most 16 names")
	}
	if f.defaultTakeover != projections.TakeoverReclaim && f.defaultTakeover != projections.TakeoverManual {
		return c, 0, fmt.Errorf("--default-takeover: %q is not reclaim or manual", f.defaultTakeover)
	}
	c.DefaultTakeover = f.defaultTakeover
	every, err := strconv.ParseUint(f.snapshotEvery, 10, 64)
	if err != nil || every < 1000 || every > 10_000_000 {
		return c, 0, fmt.Errorf("--snapshot-every: %q is outside its bounds 1000 – 10000000", f.snapshotEvery)
	}
	if f.claimSecret != "" {
		if !secretRE.MatchString(f.claimSecret) {
			return c, 0, fmt.Errorf("--claim-token-secret (TASKLEDGER_CLAIM_TOKEN_SECRET) must be exactly 64 lowercase hex characters")
		}
		c.ClaimSecret, _ = hex.DecodeString(f.claimSecret)
	}
	return c, every, nil
}

func hexBytes(s string) []byte {
	b, _ := hex.DecodeString(s)
	return b
}
