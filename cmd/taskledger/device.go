package main

import (
	"crypto/sha256"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"

	"github.com/google/uuid"
	"github.com/spf13/cobra"
)

// `taskledger device …`: register, list, show and revoke devices on a
// running server (/api/v1/admin/devices…).

type deviceDoc struct {
	DeviceID       string   `json:"device_id"`
	OwnerID        string   `json:"owner_id"`
	Name           string   `json:"name"`
	Status         string   `json:"status"`
	RequiredChecks []string `json:"required_checks"`
	Token          string   `json:"token"`
}

func (d deviceDoc) line() string {
	return fmt.Sprintf("%s  %-8s owner=%s name=%q checks=%s", d.DeviceID, d.Status, d.OwnerID, d.Name, strings.Join(d.RequiredChecks, ","))
}

func newDeviceCmd(stdout, stderr io.Writer) *cobra.Command {
	top := &cobra.Command{Use: "device", Short: "register, list, show and revoke devices on a running server",
		Long: "Operator commands on devices, through a running server's admin API.\nConnection: --server URL (env TASKLEDGER_SERVER, default " + defaultServer + "), the admin token from --token-file FILE or env TASKLEDGER_TOKEN."}
	var r remoteFlags
	r.register(top.PersistentFlags())

	var owner string
	var checks []string
	reg := &cobra.Command{Use: "register NAME --owner ID", Short: "register a device; prints its token once",
		Long: "Register a device for an owner. The device's bearer token is printed once on stdout (the device id on stderr); the server keeps only its hash. --required-checks replaces the server's default readiness checks.",
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, a []string) error {
			if owner == "" {
				return usageErr{Err: errors.New("device register needs --owner ID")}
			}
			c, err := r.client()
			if err != nil {
				return err
			}
			body := map[string]any{"owner_id": owner, "name": a[0]}
			if cmd.Flags().Changed("required-checks") {
				if checks == nil {
					checks = []string{}
				}
				body["required_checks"] = checks
			}
			_, raw, err := c.do(http.MethodPost, "/admin/devices", body, "")
			if err != nil {
				return err
			}
			if r.json {
				return printJSON(stdout, raw)
			}
			var d deviceDoc
			if err := json.Unmarshal(raw, &d); err != nil {
				return err
			}
			if d.Token == "" {
				fmt.Fprintf(stderr, "taskledger: device %s was registered by an earlier invocation with this idempotency key; its token was shown then\n", d.DeviceID)
				return nil
			}
			fmt.Fprintln(stdout, d.Token)
			fmt.Fprintf(stderr, "taskledger: device %s registered (the token above is shown only now)\n", d.DeviceID)
			return nil
		}}
	reg.Flags().StringVar(&owner, "owner", "", "the owner id (a UUIDv4; required)")
	reg.Flags().StringSliceVar(&checks, "required-checks", nil, "readiness checks this device must report true (replaces the server default; empty for none)")

	list := &cobra.Command{Use: "list", Short: "list devices", Long: "List every device with its status, owner and required checks.", Args: cobra.NoArgs,
		RunE: func(*cobra.Command, []string) error {
			c, err := r.client()
			if err != nil {
				return err
			}
			_, raw, err := c.do(http.MethodGet, "/admin/devices", nil, "")
			if err != nil {
				return err
			}
			if r.json {
				return printJSON(stdout, raw)
			}
			var page struct {
				Devices []deviceDoc `json:"devices"`
			}
			if err := json.Unmarshal(raw, &page); err != nil {
				return err
			}
			for _, d := range page.Devices {
				fmt.Fprintln(stdout, d.line())
			}
			return nil
		}}
	show := &cobra.Command{Use: "show ID", Short: "one device's document", Long: "Show one device: status, owner, required checks, presence and open task (never its token).", Args: cobra.ExactArgs(1),
		RunE: func(_ *cobra.Command, a []string) error {
			return r.show(stdout, "/admin/devices/"+url.PathEscape(a[0]), deviceAnswer)
		}}
	var reason string
	revoke := &cobra.Command{Use: "revoke ID", Short: "revoke a device (its token stops working at once)", Long: "Revoke a device: its token is unknown from now on; its open task stays until an operator recovers it.", Args: cobra.ExactArgs(1),
		RunE: func(_ *cobra.Command, a []string) error {
			c, err := r.client()
			if err != nil {
				return err
			}
			_, raw, err := c.do(http.MethodPost, "/admin/devices/"+url.PathEscape(a[0])+"/revoke", map[string]any{"reason": reason}, "")
			if err != nil {
				return err
			}
			return deviceAnswer(stdout, &r, raw)
		}}
	revoke.Flags().StringVar(&reason, "reason", "operator", "the reason recorded on the event")
	top.AddCommand(reg, list, show, revoke)
	return top
}

// deviceAnswer prints a device document answer: JSON or one line.
func deviceAnswer(w io.Writer, r *remoteFlags, raw []byte) error {
	return docAnswer[deviceDoc](w, r, raw)
}

// uuidFrom derives a UUIDv4-shaped key from s (stable for the same s).
func uuidFrom(s string) string {
	h := sha256.Sum256([]byte(s))
	var u uuid.UUID
	copy(u[:], h[:16])
	u[6] = (u[6] & 0x0f) | 0x40
	u[8] = (u[8] & 0x3f) | 0x80
	return u.String()
}
