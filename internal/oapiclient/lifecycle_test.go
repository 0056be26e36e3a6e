package oapiclient_test

// A task's whole lifecycle through the client oapi-codegen generates from
// the committed OpenAPI document, against a real server (an in-process
// node on a loopback HTTP listener): what an integrator does first.

import (
	"context"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"

	"taskledger/internal/oapiclient"
	"taskledger/node/nodetest"
)

func bearer(token string) oapiclient.RequestEditorFn {
	return func(_ context.Context, r *http.Request) error {
		r.Header.Set("Authorization", "Bearer "+token)
		return nil
	}
}

func key() oapiclient.IdempotencyKey { return uuid.NewString() }

func TestGeneratedClientRunsATaskLifecycle(t *testing.T) {
	n := nodetest.Start(t)
	c, err := oapiclient.NewClientWithResponses(n.URL, oapiclient.WithHTTPClient(n.HTTP))
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	admin := bearer(n.AdminToken)
	must := func(what string, status int, want int, body []byte) {
		t.Helper()
		if status != want {
			t.Fatalf("%s: %d, want %d: %s", what, status, want, body)
		}
	}

	// The operator registers a device (default required checks) and
	// creates an authorized task.
	reg, err := c.RegisterDeviceWithResponse(ctx, &oapiclient.RegisterDeviceParams{IdempotencyKey: key()},
		oapiclient.RegisterDeviceJSONRequestBody{Name: "phone-1", OwnerId: uuid.New()}, admin)
	if err != nil {
		t.Fatal(err)
	}
	must("register", reg.StatusCode(), 201, reg.Body)
	device := reg.JSON201
	if device.Token == nil {
		t.Fatalf("no token in %s", reg.Body)
	}
	dev := bearer(*device.Token)
	created, err := c.CreateTaskWithResponse(ctx, &oapiclient.CreateTaskParams{IdempotencyKey: key()},
		oapiclient.CreateTaskJSONRequestBody{Payload: map[string]any{"action": "open_app"},
			Authorize: &struct {
				Takeover   *oapiclient.Takeover `json:"takeover,omitempty"`
				TtlSeconds int                  `json:"ttl_seconds"`
			}{TtlSeconds: 3600}}, admin)
	if err != nil {
		t.Fatal(err)
	}
	must("create", created.StatusCode(), 201, created.Body)
	taskUUID := created.JSON201.Id
	taskID := oapiclient.TaskId(taskUUID.String())
	if created.JSON201.Authorization == nil || created.JSON201.Authorization.Takeover != oapiclient.TakeoverReclaim {
		t.Fatalf("the task detail's authorization has no takeover: %s", created.Body)
	}

	// The device reports presence with every check it must pass.
	checks := map[string]bool{}
	for _, name := range device.RequiredChecks {
		checks[name] = true
	}
	now := time.Now().Truncate(time.Millisecond) //tl:wallclock a device's own clock
	pres, err := c.ReportPresenceWithResponse(ctx, oapiclient.ReportPresenceJSONRequestBody{DeviceId: device.DeviceId,
		AppVersion: "1.0.0", OsVersion: "Debian 12", TargetAppVersion: "1.0.0", Checks: checks, ClientTime: &now}, dev)
	if err != nil {
		t.Fatal(err)
	}
	must("presence", pres.StatusCode(), 200, pres.Body)
	if !pres.JSON200.Claimable {
		t.Fatalf("not claimable: %s", pres.Body)
	}

	// Claim, start, heartbeat, complete.
	claimToken := nodetest.NewClaimToken()
	claim, err := c.ClaimNextTaskWithResponse(ctx, &oapiclient.ClaimNextTaskParams{IdempotencyKey: key(), XClaimToken: &claimToken},
		oapiclient.ClaimNextTaskJSONRequestBody{DeviceId: device.DeviceId, SessionId: uuid.New()}, dev)
	if err != nil {
		t.Fatal(err)
	}
	must("claim-next", claim.StatusCode(), 200, claim.Body)
	if claim.JSON200.Task.Id != taskUUID {
		t.Fatalf("claimed %s, want %s", claim.JSON200.Task.Id, taskUUID)
	}
	gen := claim.JSON200.ClaimGeneration
	start, err := c.StartTaskWithResponse(ctx, taskID, &oapiclient.StartTaskParams{IdempotencyKey: key(), XClaimToken: claimToken},
		oapiclient.StartTaskJSONRequestBody{DeviceId: device.DeviceId, ClaimGeneration: gen, ExpectedVersion: claim.JSON200.Version}, dev)
	if err != nil {
		t.Fatal(err)
	}
	must("start", start.StatusCode(), 200, start.Body)
	exec := *start.JSON200.ExecutionId
	hb, err := c.HeartbeatTaskWithResponse(ctx, taskID, &oapiclient.HeartbeatTaskParams{IdempotencyKey: key(), XClaimToken: claimToken},
		oapiclient.HeartbeatTaskJSONRequestBody{DeviceId: device.DeviceId, ClaimGeneration: gen, ExecutionId: exec,
			Step: "opening", ClientTime: &now}, dev)
	if err != nil {
		t.Fatal(err)
	}
	must("heartbeat", hb.StatusCode(), 200, hb.Body)
	done, err := c.CompleteTaskWithResponse(ctx, taskID, &oapiclient.CompleteTaskParams{IdempotencyKey: key(), XClaimToken: claimToken},
		oapiclient.CompleteTaskJSONRequestBody{DeviceId: device.DeviceId, ClaimGeneration: gen, ExecutionId: exec,
			ExpectedVersion: hb.JSON200.Version, Result: map[string]any{"ok": true}}, dev)
	if err != nil {
		t.Fatal(err)
	}
	must("complete", done.StatusCode(), 200, done.Body)

	// The operator reads the task and its history.
	task, err := c.GetTaskWithResponse(ctx, taskID, admin)
	if err != nil {
		t.Fatal(err)
	}
	must("get task", task.StatusCode(), 200, task.Body)
	if task.JSON200.State != oapiclient.StateSucceeded {
		t.Fatalf("state %s: %s", task.JSON200.State, task.Body)
	}
	hist, err := c.GetTaskEventsWithResponse(ctx, taskID, admin)
	if err != nil {
		t.Fatal(err)
	}
	must("history", hist.StatusCode(), 200, hist.Body)
	var types []string
	for _, e := range hist.JSON200.Events {
		types = append(types, e.Type)
	}
	want := []string{"task.created", "task.claimed", "task.started", "task.heartbeat", "task.completed"}
	if strings.Join(types, " ") != strings.Join(want, " ") {
		t.Fatalf("history %v, want %v", types, want)
	}
}
