/* SPDX-License-Identifier: MIT */
/* sluice-cni: what the plugin's main (cli/cni.c) and its tests share: the
 * network config, the policy choice, the result and error JSON
 * (cli/cni_conf.c). */
#ifndef SLUICE_CLI_CNI_H
#define SLUICE_CLI_CNI_H

#include <limits.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

/* The one CNI version sluice-cni speaks (ADD, DEL, CHECK, VERSION). */
#define CNI_VERSION "1.0.0"
/* The sandbox of a container: CNI_SANDBOX_PREFIX + the first
 * CNI_SANDBOX_ID_LEN characters of CNI_CONTAINERID (DESIGN.md). */
#define CNI_SANDBOX_PREFIX "cni-"
#define CNI_SANDBOX_ID_LEN 24
/* Where a pod names its policy (runtimeConfig, through the
 * io.kubernetes.cri.pod-annotations capability) and the CNI_ARGS key. */
#define CNI_ANNOTATION_POLICY "sluice.io/policy"
#define CNI_ARGS_POLICY "SLUICE_POLICY"
#define CNI_POLICY_NAME_MAX 63
#define CNI_DEFAULT_SOCKET "/run/sluice/sluiced.sock"
#define CNI_DEFAULT_POLICY_DIR "/etc/sluice/policies"

/* The spec's well-known error codes (SPEC.md, "Error"), and sluice-cni's
 * own, from 100 up as the spec leaves them to plugins. */
enum cni_code {
	CNI_ERR_VERSION = 1,	 /* incompatible CNI version */
	CNI_ERR_UNSUPPORTED = 2, /* unsupported field in network configuration */
	CNI_ERR_UNKNOWN_CT = 3,	 /* container unknown or does not exist */
	CNI_ERR_ENV = 4,	 /* invalid necessary environment variables */
	CNI_ERR_IO = 5,		 /* I/O failure */
	CNI_ERR_DECODE = 6,	 /* failed to decode content */
	CNI_ERR_CONFIG = 7,	 /* invalid network config */
	CNI_ERR_TRY_AGAIN = 11,	 /* try again later: the broker cannot be reached */
	CNI_ERR_POLICY = 100,	 /* the policy chosen is not a name, or no such file */
	CNI_ERR_WIRE = 101,	 /* attaching or detaching the sandbox failed */
	CNI_ERR_CHECK = 102,	 /* CHECK found the sandbox not as ADD left it */
};

/* One invocation: the network config from stdin and the CNI_* environment. */
struct cni_conf {
	char version[16];
	char name[128]; /* the network's */
	char socket[108];
	char broker_netns[PATH_MAX]; /* "": the namespace sluice-cni runs in */
	char policy_dir[PATH_MAX];
	char policy[CNI_POLICY_NAME_MAX + 1]; /* the config's default; "" if none */
	char annotation[256];		      /* sluice.io/policy, as the pod gave it; "" if none */
	bool audit; /* `"audit": true`: its sandboxes in audit mode (`create --audit`) */
	bool prev_result;
	char prev_addr[20]; /* prevResult's first address ("A.B.C.D/N"), "" if none */
};

/* A failure, as the runtime is told: code, msg and details. */
struct cni_error {
	int code;
	char msg[256];
	char details[512];
};

/**
 * cni_conf_parse() - parse and check a network config
 * @json:    the config, as read from stdin (need not be NUL-terminated)
 * @len:     its length
 * @conf:    filled on success (zeroed first)
 * @e:       on failure, the CNI error to answer with
 *
 * Keys the plugin does not know are left alone (runtimes add their own);
 * `ipam` is refused, as sluice-cni takes its addresses from the broker.
 *
 * Return: 0 or a negative errno (-EINVAL, -EPROTO for a version mismatch).
 */
int cni_conf_parse(const char *json, size_t len, struct cni_conf *conf, struct cni_error *e);

/**
 * cni_policy_name_ok() - may @name become policyDir/@name.yaml?
 * @name: a policy name
 *
 * Return: true for 1 to CNI_POLICY_NAME_MAX characters of [A-Za-z0-9._-],
 * not starting with '.', holding no "..": a name cannot leave policyDir.
 */
bool cni_policy_name_ok(const char *name);

/**
 * cni_args_get() - one value of CNI_ARGS ("K=V;K=V")
 * @args: CNI_ARGS, or NULL
 * @key:  the key
 * @out:  the value, on success
 * @outlen: its size
 *
 * Return: 1 found, 0 absent, -EINVAL when a pair is not K=V or the value
 * does not fit.
 */
int cni_args_get(const char *args, const char *key, char *out, size_t outlen);

/**
 * cni_policy_choose() - the policy file of a container
 * @conf:   the parsed config (its annotation and default)
 * @args:   CNI_ARGS, or NULL
 * @path:   policyDir/NAME.yaml, on success
 * @pathlen: its size
 * @e:      on failure, the CNI error
 *
 * First that is set: the pod annotation sluice.io/policy, CNI_ARGS
 * SLUICE_POLICY, the config's `policy`. The name chosen is checked
 * (cni_policy_name_ok()), not looked up: the caller does.
 *
 * Return: 0 or -EINVAL.
 */
int cni_policy_choose(const struct cni_conf *conf, const char *args, char *path, size_t pathlen,
		      struct cni_error *e);

/**
 * cni_sandbox_name() - the sandbox name of a container
 * @id:  CNI_CONTAINERID
 * @out: "cni-" and the first CNI_SANDBOX_ID_LEN characters of @id
 * @outlen: its size
 *
 * Return: 0; -EINVAL when @id is not a CNI container id (empty, or not
 * an alphanumeric followed by [A-Za-z0-9._-]).
 */
int cni_sandbox_name(const char *id, char *out, size_t outlen);

/* A Kubernetes pod's files (cli/cni_pod.c): CNI_POD_DIR/NAMESPACE/POD on
 * the node, mounted by the pod at CNI_POD_MOUNT (deploy/kubernetes). */
#define CNI_POD_DIR "/run/sluice-pods"
#define CNI_POD_MOUNT "/etc/sluice-sandbox"
/* CNI_POD_MARKS/SANDBOX: "NAMESPACE/POD" (no namespace starts with '.') */
#define CNI_POD_MARKS CNI_POD_DIR "/.sandboxes"
#define CNI_K8S_NAME_MAX 253

/**
 * cni_pod_names() - the pod of CNI_ARGS (K8S_POD_NAMESPACE, K8S_POD_NAME)
 * @args:  CNI_ARGS, or NULL
 * @ns:    the namespace, on success
 * @pod:   the pod's name, on success
 *
 * Return: 1 when both are there and are Kubernetes names (at most 253 of
 * [a-z0-9.-], starting with an alphanumeric, no ".."); 0 when either is
 * absent; -EINVAL otherwise.
 */
int cni_pod_names(const char *args, char ns[CNI_K8S_NAME_MAX + 1], char pod[CNI_K8S_NAME_MAX + 1]);

struct netns_sandbox;

/**
 * cni_pod_publish() - the pod's CA bundle and environment, where the pod
 * mounts them: CNI_POD_DIR/@ns/@pod/ca-bundle.crt, env (KEY=VALUE lines,
 * the CA variables naming CNI_POD_MOUNT/ca-bundle.crt) and sandbox (whose
 * they are; written first)
 * @sb: the sandbox, as its record has it
 * @e:  on failure, the CNI error
 *
 * Return: 0 or a negative errno.
 */
int cni_pod_publish(const char *ns, const char *pod, const struct netns_sandbox *sb,
		    struct cni_error *e);

/**
 * cni_pod_withdraw() - remove the pod's files of @sandbox (found through
 * its mark, CNI_POD_MARKS/@sandbox), if they are still its own: a pod of
 * the same name made since keeps its files
 *
 * Return: 0 (also when there is nothing, or it is another's), or a
 * negative errno.
 */
int cni_pod_withdraw(const char *sandbox);

/* What ADD reports: the two ends of the veth and the /30. */
struct cni_wiring {
	char host_if[16], host_mac[18]; /* in the broker's namespace */
	char ct_if[16], ct_mac[18];	/* in the container's */
	char netns[PATH_MAX];		/* CNI_NETNS */
	uint32_t addr, gw;		/* host byte order */
	unsigned prefix;		/* 30 */
};

/**
 * cni_result_json() - the ADD result
 * @version: the config's cniVersion
 * @w:       the wiring
 *
 * Return: the JSON (malloc'd, the caller frees it), or NULL when out of memory.
 */
char *cni_result_json(const char *version, const struct cni_wiring *w);

/**
 * cni_error_json() - the error answer of the spec
 * @version: the config's cniVersion, or NULL before it is known
 * @e:       the error
 *
 * Return: the JSON (malloc'd, the caller frees it), or NULL when out of memory.
 */
char *cni_error_json(const char *version, const struct cni_error *e);

/* The VERSION answer (malloc'd, the caller frees it). */
char *cni_version_json(void);

/* Fills @e; returns -@err_no (a negative errno) for the caller to pass on. */
int cni_fail(struct cni_error *e, int code, int err_no, const char *details, const char *fmt, ...)
	__attribute__((format(printf, 5, 6)));

#endif
