"""Which Services' `spec.loadBalancerClass` a pyccm tree claims
(kubernetes/cloud-provider-openstack#2598).

Upstream's service controller handles only Services without a class; a Service with one
belongs to another controller and is ignored entirely. `--load-balancer-class NAME` makes
pyccm claim the Services of that class too, and `--load-balancer-class-only` only those,
so two trees (or pyccm and another load-balancer controller) can share a cluster: each
claims its own class and never touches the other's Services, their load balancers, their
status or their finalizers.

The manager and the service worker both need the same answer: the manager to keep the
Services the tree does not claim out of the service view (`protocol.projections`), the
worker (and a standalone worker's own projection) to act on the same set. Both take the
flags, and both default them from the environment (`PYCCM_LOAD_BALANCER_CLASS`,
`PYCCM_LOAD_BALANCER_CLASS_ONLY`), which supervisord passes to every process of a tree.

A Service's class is immutable while it is of type LoadBalancer, and cleared when it
stops being one; a Service can get a class only when it becomes a LoadBalancer. So a
Service this tree does not claim holds our finalizer only if it went from a claimed
LoadBalancer to another type and back to a LoadBalancer of a foreign class before our
cleanup ran, or if the tree's claim was reconfigured. A worker that synced it before
deletes the load balancer it made and removes our finalizer; one that did not (it
restarted meanwhile) leaves it alone while it lives, as upstream does; once the Service is
deleted it gives the Service's own controller 30 s (`FOREIGN_GRACE`) to remove the finalizer
(both trees' finalizers have one name, so it is most likely the owner's), and cleans up only
if it is still there. Either way its status, which the other controller owns, is not
written.
"""

from __future__ import annotations

import argparse
import os
import re
from dataclasses import dataclass

CLASS_ENV = "PYCCM_LOAD_BALANCER_CLASS"
CLASS_ONLY_ENV = "PYCCM_LOAD_BALANCER_CLASS_ONLY"

# Kubernetes validates the field as a label-style qualified name: an optional DNS
# subdomain prefix and "/", then a name of at most 63 characters.
_NAME = r"[A-Za-z0-9]([-A-Za-z0-9_.]{0,61}[A-Za-z0-9])?"
_PREFIX = r"[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*"
QUALIFIED_NAME = re.compile(rf"((?=.{{1,253}}/){_PREFIX}/)?{_NAME}")


@dataclass(frozen=True)
class LoadBalancerClasses:
    """The classes a tree claims: `name` (none when empty) and, unless `only`, Services
    without a class."""

    # Empty: upstream's behaviour, only Services without a class.
    name: str = ""
    # False: Services without a class are claimed too, as upstream's default controller
    # does, so adding a class to a running tree takes nothing away from it.
    only: bool = False

    def __post_init__(self) -> None:
        if self.name and not QUALIFIED_NAME.fullmatch(self.name):
            raise ValueError(
                f"--load-balancer-class {self.name[:80]!r} is not a qualified name "
                "(e.g. internal-vip or example.com/internal-vip)"
            )
        if self.only and not self.name:
            raise ValueError("--load-balancer-class-only needs --load-balancer-class NAME")

    def claims(self, service_class: str | None) -> bool:
        """Whether a LoadBalancer Service with this `spec.loadBalancerClass` is ours."""
        if service_class is None:
            return not self.only
        return bool(self.name) and service_class == self.name


UNCLASSED = LoadBalancerClasses()


def add_load_balancer_class_flags(parser: argparse._ActionsContainer) -> None:
    parser.add_argument(
        "--load-balancer-class",
        default=os.environ.get(CLASS_ENV, ""),
        metavar="NAME",
        help="also claim the LoadBalancer Services of this spec.loadBalancerClass; Services "
        f"of any other class are never touched (default ${CLASS_ENV}, else none: only "
        "Services without a class, as upstream); give the manager and the service worker "
        "the same value",
    )
    parser.add_argument(
        "--load-balancer-class-only",
        action="store_true",
        default=os.environ.get(CLASS_ONLY_ENV, "") == "true",
        help="claim only the Services of --load-balancer-class, not those without a class "
        f"(default: ${CLASS_ONLY_ENV} is true)",
    )


def load_balancer_classes(args: argparse.Namespace) -> LoadBalancerClasses:
    """The flags' claim; ValueError names a bad flag."""
    return LoadBalancerClasses(name=args.load_balancer_class, only=args.load_balancer_class_only)
