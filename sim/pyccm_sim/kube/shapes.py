"""The shapes of the kinds the simulator serves (see schema.py), after the upstream Go types.

Strict where a manifest's typo should fail as it does on a real cluster: every kind's top
level and metadata, the workloads down to their containers, probes and security contexts,
RBAC rules and bindings, Services. Open (`ANY`) below that and where only controllers write
(status, node spec). A struct's field names are the upstream type's, all of them (a test
checks them against the kubernetes client's models), so a valid manifest is never refused;
fields not named in the keyword arguments accept any JSON.

List merge keys are the `patchMergeKey`/`patchStrategy` tags of k8s.io/api: containers,
volumes, env and image pull secrets by `name`, ports by `containerPort` (Service ports by
`port`), volume mounts by `mountPath`, owner references by `uid`, finalizers as a set;
tolerations, RBAC rules and subjects carry none and are replaced whole.
"""

from __future__ import annotations

from types import MappingProxyType

from pyccm_sim.kube.schema import (
    ANY,
    BOOL,
    BYTES,
    INT32,
    INT64,
    INT_OR_STRING,
    QUANTITY,
    STRING,
    STRINGS,
    ListOf,
    MapOf,
    Shape,
    Struct,
)

_META = "io.k8s.apimachinery.pkg.apis.meta.v1."
_CORE = "io.k8s.api.core.v1."


def struct(type_name: str, untyped: str = "", /, **typed: Shape) -> Struct:
    """A struct named `type_name` whose fields are `typed` plus the space-separated
    `untyped` names (any JSON)."""
    fields: dict[str, Shape] = dict.fromkeys(untyped.split(), ANY)
    fields.update(typed)
    return Struct(type_name, MappingProxyType(dict(sorted(fields.items()))))


def by_name(items: Shape, strategy: str = "merge") -> ListOf:
    return ListOf(items, merge_key="name", strategy=strategy)


STRING_MAP = MapOf(STRING)
OWNER_REFERENCE = struct(
    _META + "OwnerReference",
    apiVersion=STRING,
    blockOwnerDeletion=BOOL,
    controller=BOOL,
    kind=STRING,
    name=STRING,
    uid=STRING,
)
OBJECT_META = struct(
    _META + "ObjectMeta",
    "creationTimestamp deletionTimestamp managedFields",
    annotations=STRING_MAP,
    deletionGracePeriodSeconds=INT64,
    finalizers=ListOf(STRING, strategy="merge"),
    generateName=STRING,
    generation=INT64,
    labels=STRING_MAP,
    name=STRING,
    namespace=STRING,
    ownerReferences=ListOf(OWNER_REFERENCE, merge_key="uid", strategy="merge"),
    resourceVersion=STRING,
    selfLink=STRING,
    uid=STRING,
)
LABEL_SELECTOR = struct(
    _META + "LabelSelector",
    matchExpressions=ListOf(
        struct(_META + "LabelSelectorRequirement", key=STRING, operator=STRING, values=STRINGS)
    ),
    matchLabels=STRING_MAP,
)
LOCAL_REFERENCE = struct(_CORE + "LocalObjectReference", name=STRING)


def kind(type_name: str, untyped: str = "", /, **typed: Shape) -> Struct:
    """A top-level kind: apiVersion, kind and metadata, plus its own fields."""
    return struct(type_name, untyped, apiVersion=STRING, kind=STRING, metadata=OBJECT_META, **typed)


# -- pods -----------------------------------------------------------------------------------

_PORT_NUMBER = {"port": INT_OR_STRING}
HTTP_GET = struct(
    _CORE + "HTTPGetAction",
    "httpHeaders protocol",
    host=STRING,
    path=STRING,
    scheme=STRING,
    **_PORT_NUMBER,
)
PROBE = struct(
    _CORE + "Probe",
    "grpc",
    exec=struct(_CORE + "ExecAction", command=STRINGS),
    failureThreshold=INT32,
    httpGet=HTTP_GET,
    initialDelaySeconds=INT32,
    periodSeconds=INT32,
    successThreshold=INT32,
    tcpSocket=struct(_CORE + "TCPSocketAction", host=STRING, **_PORT_NUMBER),
    terminationGracePeriodSeconds=INT64,
    timeoutSeconds=INT32,
)
SECCOMP_PROFILE = struct(_CORE + "SeccompProfile", localhostProfile=STRING, type=STRING)
SECURITY_CONTEXT = struct(
    _CORE + "SecurityContext",
    "appArmorProfile procMount seLinuxOptions windowsOptions",
    allowPrivilegeEscalation=BOOL,
    capabilities=struct(_CORE + "Capabilities", add=STRINGS, drop=STRINGS),
    privileged=BOOL,
    readOnlyRootFilesystem=BOOL,
    runAsGroup=INT64,
    runAsNonRoot=BOOL,
    runAsUser=INT64,
    seccompProfile=SECCOMP_PROFILE,
)
POD_SECURITY_CONTEXT = struct(
    _CORE + "PodSecurityContext",
    "appArmorProfile fsGroupChangePolicy seLinuxChangePolicy seLinuxOptions sysctls "
    "supplementalGroupsPolicy windowsOptions",
    fsGroup=INT64,
    runAsGroup=INT64,
    runAsNonRoot=BOOL,
    runAsUser=INT64,
    seccompProfile=SECCOMP_PROFILE,
    supplementalGroups=ListOf(INT64),
)
RESOURCES = struct(
    _CORE + "ResourceRequirements", "claims", limits=MapOf(QUANTITY), requests=MapOf(QUANTITY)
)
CONTAINER = struct(
    _CORE + "Container",
    "envFrom lifecycle resizePolicy restartPolicy restartPolicyRules stdin stdinOnce tty",
    args=STRINGS,
    command=STRINGS,
    env=by_name(struct(_CORE + "EnvVar", "valueFrom", name=STRING, value=STRING)),
    image=STRING,
    imagePullPolicy=STRING,
    livenessProbe=PROBE,
    name=STRING,
    ports=ListOf(
        struct(
            _CORE + "ContainerPort",
            containerPort=INT32,
            hostIP=STRING,
            hostPort=INT32,
            name=STRING,
            protocol=STRING,
        ),
        merge_key="containerPort",
        strategy="merge",
    ),
    readinessProbe=PROBE,
    resources=RESOURCES,
    securityContext=SECURITY_CONTEXT,
    startupProbe=PROBE,
    terminationMessagePath=STRING,
    terminationMessagePolicy=STRING,
    volumeDevices=ListOf(ANY, merge_key="devicePath", strategy="merge"),
    volumeMounts=ListOf(
        struct(
            _CORE + "VolumeMount",
            "bindMountOptions mountPropagation recursiveReadOnly",
            mountPath=STRING,
            name=STRING,
            readOnly=BOOL,
            subPath=STRING,
            subPathExpr=STRING,
        ),
        merge_key="mountPath",
        strategy="merge",
    ),
    workingDir=STRING,
)
VOLUME = struct(
    _CORE + "Volume",
    "awsElasticBlockStore azureDisk azureFile cephfs cinder configMap csi downwardAPI "
    "emptyDir ephemeral fc flexVolume flocker gcePersistentDisk gitRepo glusterfs hostPath "
    "image iscsi nfs persistentVolumeClaim photonPersistentDisk portworxVolume projected "
    "quobyte rbd scaleIO secret storageos vsphereVolume",
    name=STRING,
)
POD_SPEC = struct(
    _CORE + "PodSpec",
    "affinity dnsConfig evictionResponders os overhead readinessGates schedulingGroup tolerations",
    activeDeadlineSeconds=INT64,
    automountServiceAccountToken=BOOL,
    containers=by_name(CONTAINER),
    dnsPolicy=STRING,
    enableServiceLinks=BOOL,
    ephemeralContainers=by_name(ANY),
    hostAliases=ListOf(ANY, merge_key="ip", strategy="merge"),
    hostIPC=BOOL,
    hostNetwork=BOOL,
    hostPID=BOOL,
    hostUsers=BOOL,
    hostname=STRING,
    hostnameOverride=STRING,
    imagePullSecrets=by_name(LOCAL_REFERENCE),
    initContainers=by_name(CONTAINER),
    nodeName=STRING,
    nodeSelector=STRING_MAP,
    preemptionPolicy=STRING,
    priority=INT32,
    priorityClassName=STRING,
    resourceClaims=by_name(ANY, "merge,retainKeys"),
    resources=RESOURCES,
    restartPolicy=STRING,
    runtimeClassName=STRING,
    schedulerName=STRING,
    schedulingGates=by_name(ANY),
    securityContext=POD_SECURITY_CONTEXT,
    serviceAccount=STRING,
    serviceAccountName=STRING,
    setHostnameAsFQDN=BOOL,
    shareProcessNamespace=BOOL,
    subdomain=STRING,
    terminationGracePeriodSeconds=INT64,
    topologySpreadConstraints=ListOf(ANY, merge_key="topologyKey", strategy="merge"),
    volumes=by_name(VOLUME, "merge,retainKeys"),
)
POD_TEMPLATE = struct(_CORE + "PodTemplateSpec", metadata=OBJECT_META, spec=POD_SPEC)

# -- workloads ------------------------------------------------------------------------------

_APPS = "io.k8s.api.apps.v1."
DEPLOYMENT = kind(
    _APPS + "Deployment",
    "status",
    spec=struct(
        _APPS + "DeploymentSpec",
        minReadySeconds=INT32,
        paused=BOOL,
        progressDeadlineSeconds=INT32,
        replicas=INT32,
        revisionHistoryLimit=INT32,
        selector=LABEL_SELECTOR,
        strategy=struct(
            _APPS + "DeploymentStrategy",
            rollingUpdate=struct(
                _APPS + "RollingUpdateDeployment",
                maxSurge=INT_OR_STRING,
                maxUnavailable=INT_OR_STRING,
            ),
            type=STRING,
        ),
        template=POD_TEMPLATE,
    ),
)
STATEFUL_SET = kind(
    _APPS + "StatefulSet",
    "status",
    spec=struct(
        _APPS + "StatefulSetSpec",
        "ordinals persistentVolumeClaimRetentionPolicy updateStrategy",
        minReadySeconds=INT32,
        podManagementPolicy=STRING,
        replicas=INT32,
        revisionHistoryLimit=INT32,
        selector=LABEL_SELECTOR,
        serviceName=STRING,
        template=POD_TEMPLATE,
        volumeClaimTemplates=ListOf(ANY),
    ),
)
POD_DISRUPTION_BUDGET = kind(
    "io.k8s.api.policy.v1.PodDisruptionBudget",
    "status",
    spec=struct(
        "io.k8s.api.policy.v1.PodDisruptionBudgetSpec",
        maxUnavailable=INT_OR_STRING,
        minAvailable=INT_OR_STRING,
        selector=LABEL_SELECTOR,
        unhealthyPodEvictionPolicy=STRING,
    ),
)

# -- configuration and identity -------------------------------------------------------------

NAMESPACE = kind(_CORE + "Namespace", "spec status")
SECRET = kind(
    _CORE + "Secret",
    data=MapOf(BYTES),
    immutable=BOOL,
    stringData=STRING_MAP,
    type=STRING,
)
CONFIG_MAP = kind(_CORE + "ConfigMap", binaryData=MapOf(BYTES), data=STRING_MAP, immutable=BOOL)
SERVICE_ACCOUNT = kind(
    _CORE + "ServiceAccount",
    automountServiceAccountToken=BOOL,
    imagePullSecrets=by_name(LOCAL_REFERENCE),
    secrets=by_name(ANY),
)

_RBAC = "io.k8s.api.rbac.v1."
POLICY_RULE = struct(
    _RBAC + "PolicyRule",
    apiGroups=STRINGS,
    nonResourceURLs=STRINGS,
    resourceNames=STRINGS,
    resources=STRINGS,
    verbs=STRINGS,
)
ROLE_REF = struct(_RBAC + "RoleRef", apiGroup=STRING, kind=STRING, name=STRING)
SUBJECT = struct(_RBAC + "Subject", apiGroup=STRING, kind=STRING, name=STRING, namespace=STRING)
CLUSTER_ROLE = kind(_RBAC + "ClusterRole", "aggregationRule", rules=ListOf(POLICY_RULE))
ROLE = kind(_RBAC + "Role", rules=ListOf(POLICY_RULE))
CLUSTER_ROLE_BINDING = kind(
    _RBAC + "ClusterRoleBinding", roleRef=ROLE_REF, subjects=ListOf(SUBJECT)
)
ROLE_BINDING = kind(_RBAC + "RoleBinding", roleRef=ROLE_REF, subjects=ListOf(SUBJECT))

# -- what the CCM itself reads and writes (nested parts open: only controllers write them) --

SERVICE = kind(
    _CORE + "Service",
    "status",
    spec=struct(
        _CORE + "ServiceSpec",
        "sessionAffinityConfig",
        allocateLoadBalancerNodePorts=BOOL,
        clusterIP=STRING,
        clusterIPs=STRINGS,
        externalIPs=STRINGS,
        externalName=STRING,
        externalTrafficPolicy=STRING,
        healthCheckNodePort=INT32,
        internalTrafficPolicy=STRING,
        ipFamilies=STRINGS,
        ipFamilyPolicy=STRING,
        loadBalancerClass=STRING,
        loadBalancerIP=STRING,
        loadBalancerSourceRanges=STRINGS,
        ports=ListOf(
            struct(
                _CORE + "ServicePort",
                appProtocol=STRING,
                name=STRING,
                nodePort=INT32,
                port=INT32,
                protocol=STRING,
                targetPort=INT_OR_STRING,
            ),
            merge_key="port",
            strategy="merge",
        ),
        publishNotReadyAddresses=BOOL,
        selector=STRING_MAP,
        sessionAffinity=STRING,
        trafficDistribution=STRING,
        type=STRING,
    ),
)
NODE = kind(_CORE + "Node", "spec status")
POD = kind(_CORE + "Pod", "status", spec=POD_SPEC)
EVENT = kind(
    _CORE + "Event",
    "action count eventTime firstTimestamp involvedObject lastTimestamp message reason "
    "related reportingComponent reportingInstance series source type",
)
LEASE = kind("io.k8s.api.coordination.v1.Lease", "spec")
EVENT_V1 = kind(
    "io.k8s.api.events.v1.Event",
    "action deprecatedCount deprecatedFirstTimestamp deprecatedLastTimestamp "
    "deprecatedSource eventTime note reason regarding related reportingController "
    "reportingInstance series type",
)
