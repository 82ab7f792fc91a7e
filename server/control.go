package server

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"path/filepath"
	"reflect"
	"strings"

	"github.com/getorrery/orrery/agent"
	"github.com/getorrery/orrery/agent/acp"
	"github.com/getorrery/orrery/internal/prose"
	"github.com/getorrery/orrery/kernel"
	"github.com/getorrery/orrery/protocol"
	"github.com/getorrery/orrery/tool"
	"github.com/getorrery/orrery/ui"
)

// Limits of session.read.
const (
	defaultReadLimit = 1000
	maxReadLimit     = 10000
)

// requestSession is the session a request names (its session field), or
// "", for the request's log lines.
func requestSession(req protocol.Request) string {
	v := reflect.ValueOf(req)
	if v.Kind() != reflect.Pointer || v.Elem().Kind() != reflect.Struct {
		return ""
	}
	if f := v.Elem().FieldByName("Session"); f.IsValid() && f.Kind() == reflect.String {
		return f.String()
	}
	return ""
}

// handleControl serves POST /control: one request in the body, its reply's
// value as the answer. A refusal is a non-2xx status with {"error": "…"}.
func (s *Server) handleControl(w http.ResponseWriter, r *http.Request) {
	body, ok := s.readBody(w, r)
	if !ok {
		return
	}
	req, err := protocol.DecodeRequest(body)
	if err != nil {
		writeError(w, http.StatusBadRequest, err.Error())
		return
	}
	caller, status, err := queryCaller(r)
	if err != nil {
		writeError(w, status, err.Error())
		return
	}
	if id := requestSession(req); id != "" {
		r = r.WithContext(agent.WithSession(r.Context(), id))
	}
	value, err := s.Do(r.Context(), caller, req)
	if err != nil {
		s.kernelError(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, value)
}

// queryCaller returns the caller that the client and draws query
// parameters of r declare. A declaration that lacks a required element is
// refused (400), and so is a declaration of consent from a connection that
// has not earned the right to answer it (403).
func queryCaller(r *http.Request) (kernel.Caller, int, error) {
	q := r.URL.Query()
	caller := kernel.Caller{Client: q.Get("client")}
	if draws := q.Get("draws"); draws != "" {
		caller.Draws = strings.Split(draws, ",")
		if err := protocol.CheckDraws(caller.Client, caller.Draws); err != nil {
			return caller, http.StatusBadRequest, err
		}
		if caller.DrawsConsent() && !peerOf(r.Context()).mayConsent() {
			return caller, http.StatusForbidden, errors.New(errNoConsentRight)
		}
	}
	return caller, 0, nil
}

// checkNew refuses what a request may not ask of a new session: a model or
// agent spec that config and the command line do not define (one that
// would start a process, unless the caller is on the pipe), or a cwd
// outside the workspace roots. It returns the cwd with its symlinks
// resolved.
func (s *Server) checkNew(ctx context.Context, model, cwd string) (string, error) {
	check := s.cfg.CheckSpec
	if peerOf(ctx).pipe {
		check = s.cfg.CheckPipeSpec
	}
	if err := check(model); err != nil {
		return "", &kernel.RequestError{Msg: err.Error()}
	}
	if cwd == "" {
		return "", nil
	}
	if len(s.cfg.Roots) == 0 {
		return "", &kernel.RequestError{Msg: "this server takes no cwd from a request: omit cwd to work in the kernel's own directory, or list the directories sessions may use in [workspace] roots"}
	}
	if !filepath.IsAbs(cwd) {
		return "", &kernel.RequestError{Msg: fmt.Sprintf("cwd %s is not an absolute path: name the session's directory from the root, inside one of the workspace roots (%s)", prose.Quote(cwd), strings.Join(s.cfg.Roots, ", "))}
	}
	ws := tool.Workspace{Root: s.cfg.Roots[0], Extra: s.cfg.Roots[1:]}
	real, err := ws.Resolve(cwd)
	if err != nil {
		return "", &kernel.RequestError{Msg: fmt.Sprintf("cwd %s is outside the workspace roots (%s): pick a directory inside one, or add its directory to [workspace] roots", prose.Quote(cwd), strings.Join(s.cfg.Roots, ", "))}
	}
	return real, nil
}

// runPermissions returns the kernel's form of a run.send's permissions. A
// deny rule only narrows what the run may do, so any client may send one;
// allow rules and yes widen it as answering consent would, so only a
// connection the server trusts to answer consent may send them.
func runPermissions(ctx context.Context, p *protocol.RunPermissions) (*kernel.RunPermissions, error) {
	if p == nil {
		return nil, nil
	}
	if (len(p.Allow) > 0 || p.Yes) && !peerOf(ctx).mayConsent() {
		return nil, &kernel.RequestError{Msg: "permissions.allow and permissions.yes allow calls a person would be asked about, " +
			"and this connection may not answer consent (only a pipe, the web client this kernel serves, a node token holder or a program on this machine may): " +
			"send only permissions.deny, or present a token (orrery node token create)"}
	}
	return &kernel.RunPermissions{Allow: p.Allow, Deny: p.Deny, Yes: p.Yes}, nil
}

// sessionFor returns the session a request names, refusing an empty name.
func (s *Server) sessionFor(ctx context.Context, id string) (*kernel.Session, error) {
	if id == "" {
		return nil, &kernel.RequestError{Msg: "session is missing: name the session"}
	}
	return s.k.Session(ctx, id)
}

// Do carries out one request from caller and returns its reply value. Its
// errors are the kernel's, which every transport maps to its own refusal.
func (s *Server) Do(ctx context.Context, caller kernel.Caller, req protocol.Request) (any, error) {
	if v, ok, err := s.route(ctx, caller, req); ok {
		return v, err
	}
	if v, ok, err := s.doExt(ctx, req); ok {
		return v, err
	}
	switch q := req.(type) {
	case *protocol.SessionNew:
		model := q.Model
		if q.Agent != "" {
			if q.Model != "" {
				return nil, &kernel.RequestError{Msg: "session.new names both a model and an agent: name one (an agent runs its own model)"}
			}
			model = acp.Spec(q.Agent)
		}
		cwd, err := s.checkNew(ctx, model, q.Cwd)
		if err != nil {
			return nil, err
		}
		sess, err := s.k.CreateSession(ctx, kernel.SessionOptions{Title: q.Title, Model: model, Cwd: cwd})
		if err != nil {
			return nil, err
		}
		return protocol.SessionNewReply{Session: sess.ID()}, nil
	case *protocol.SessionList:
		list, err := s.k.Sessions(ctx)
		if err != nil {
			return nil, err
		}
		return protocol.SessionListReply{Sessions: list}, nil
	case *protocol.SessionRead:
		if q.Session == "" {
			return nil, &kernel.RequestError{Msg: "session is missing: name the session to read"}
		}
		if q.Limit < 0 || q.Limit > maxReadLimit {
			return nil, &kernel.RequestError{Msg: "limit must be between 1 and 10000: read in pages, passing the last seq as since"}
		}
		limit := q.Limit
		if limit == 0 {
			limit = defaultReadLimit
		}
		sess, err := s.k.Session(ctx, q.Session)
		if err != nil {
			return nil, err
		}
		var since uint64
		if q.Since != nil {
			since = *q.Since
		}
		frames, head, err := sess.Read(ctx, since, limit)
		if err != nil {
			return nil, err
		}
		out := protocol.SessionReadReply{Frames: make([]json.RawMessage, len(frames)), Head: head}
		for i, f := range frames {
			out.Frames[i] = f.Data
		}
		return out, nil
	case *protocol.RunSend:
		if q.Session == "" {
			return nil, &kernel.RequestError{Msg: "session is missing: name the session to send to"}
		}
		if strings.TrimSpace(q.Input.Text) == "" && len(q.Input.Attachments) == 0 {
			return nil, &kernel.RequestError{Msg: "input.text is empty: send the prompt as input.text"}
		}
		switch q.Target {
		case "", protocol.TargetRun, protocol.TargetSteer:
		default:
			return nil, &kernel.RequestError{Msg: "target " + q.Target + " is unknown: use \"steer\" to join the run in flight, or omit it"}
		}
		sess, err := s.k.Session(ctx, q.Session)
		if err != nil {
			return nil, err
		}
		atts, err := sess.AttachFiles(ctx, q.Input.Attachments)
		if err != nil {
			return nil, err
		}
		perms, err := runPermissions(ctx, q.Permissions)
		if err != nil {
			return nil, err
		}
		res, err := sess.Send(ctx, kernel.SendInput{Text: q.Input.Text, Attachments: atts, Steer: q.Target == protocol.TargetSteer, Permissions: perms, UsageEvents: q.UsageEvents})
		if err != nil {
			return nil, err
		}
		return protocol.RunSendReply{RunID: res.RunID, Target: res.Target}, nil
	case *protocol.RunCancel:
		if q.Session == "" {
			return nil, &kernel.RequestError{Msg: "session is missing: name the session whose run to cancel"}
		}
		sess, err := s.k.Session(ctx, q.Session)
		if err != nil {
			return nil, err
		}
		if err := sess.Cancel(ctx, q.RunID); err != nil {
			return nil, err
		}
		return protocol.Empty{}, nil
	case *protocol.UIMove:
		sess, err := s.sessionFor(ctx, q.Session)
		if err != nil {
			return nil, err
		}
		// The person's own layout change: they act with config's rights.
		if err := sess.Move(ctx, ui.OwnerConfig, q.Node, q.Placement); err != nil {
			return nil, err
		}
		return protocol.Empty{}, nil
	case *protocol.UIHide:
		sess, err := s.sessionFor(ctx, q.Session)
		if err != nil {
			return nil, err
		}
		if err := sess.HideNode(ctx, ui.OwnerConfig, q.Node); err != nil {
			return nil, err
		}
		return protocol.Empty{}, nil
	case *protocol.UISave:
		sess, err := s.sessionFor(ctx, q.Session)
		if err != nil {
			return nil, err
		}
		placement, err := sess.NodePlacement(ctx, q.Node)
		if err != nil {
			return nil, err
		}
		if s.cfg.SaveConfig == nil {
			return nil, &kernel.RequestError{Msg: "this server keeps no config file to save to: set the key with orrery config set"}
		}
		_, id, _ := ui.ParseNodeID(q.Node)
		key := fmt.Sprintf("ui.placements.%q.placement", id)
		if err := s.cfg.SaveConfig(key, placement); err != nil {
			return nil, &kernel.RequestError{Msg: "save " + key + ": " + err.Error()}
		}
		return protocol.Empty{}, nil
	case *protocol.UIIntent:
		sess, err := s.sessionFor(ctx, q.Session)
		if err != nil {
			return nil, err
		}
		if q.Node == "" || q.Action == "" {
			return nil, &kernel.RequestError{Msg: "ui.intent needs node and action: send the placed component's node (placed:<owner>:<id>) and an action its structure declares"}
		}
		if err := sess.Intent(ctx, q.Node, q.Action, q.Value); err != nil {
			return nil, err
		}
		return protocol.Empty{}, nil
	case *protocol.A2UIAction:
		sess, err := s.sessionFor(ctx, q.Session)
		if err != nil {
			return nil, err
		}
		if err := s.a2uiAction(ctx, sess, q.Message); err != nil {
			return nil, err
		}
		return protocol.Empty{}, nil
	case *protocol.ConsentAnswer:
		sess, err := s.sessionFor(ctx, q.Session)
		if err != nil {
			return nil, err
		}
		if q.Request == "" || q.Option == "" {
			return nil, &kernel.RequestError{Msg: "consent.answer needs request and option: answer the request of an orrery.consent.requested event with one of its options"}
		}
		if err := sess.AnswerConsent(ctx, caller, q.Request, q.Option); err != nil {
			return nil, err
		}
		return protocol.Empty{}, nil
	case *protocol.HubPost, *protocol.HubSend, *protocol.HubPublish, *protocol.HubReply, *protocol.HubSubscribe, *protocol.HubUnsubscribe:
		return s.doHub(ctx, caller, req)
	case *protocol.InputAnswer:
		return s.answerInput(ctx, caller, q)
	case *protocol.InputRefuse:
		return s.refuseInput(ctx, caller, q)
	case *protocol.WorkspaceFiles:
		sess, err := s.sessionFor(ctx, q.Session)
		if err != nil {
			return nil, err
		}
		if q.Query != "" {
			if q.Prefix != "" {
				return nil, &kernel.RequestError{Msg: "workspace.files takes a prefix or a query, not both: send prefix to list paths that start with it, or query to match fuzzily"}
			}
			found, truncated, err := sess.MatchWorkspaceFiles(ctx, q.Query, q.Limit)
			if err != nil {
				return nil, err
			}
			reply := protocol.WorkspaceFilesReply{Files: make([]string, len(found)), Matches: make([][]int, len(found)), Truncated: truncated}
			for i, f := range found {
				reply.Files[i], reply.Matches[i] = f.Path, f.Matched
			}
			return reply, nil
		}
		files, truncated, err := sess.WorkspaceFiles(ctx, q.Prefix, q.Limit)
		if err != nil {
			return nil, err
		}
		return protocol.WorkspaceFilesReply{Files: files, Truncated: truncated}, nil
	case *protocol.Hello, *protocol.SessionAttach, *protocol.SessionDetach:
		return nil, &kernel.RequestError{Msg: req.Head().T + " works only on a connection (GET /ws or a pipe); over HTTP, follow a session with GET /events?session=<id>"}
	}
	return nil, &kernel.RequestError{Msg: "request " + req.Head().T + " is not served here"}
}
