"""The processor framework: a base class, declarative specs, request/response clients, launchers."""

from .base import Processor, TypedProducer
from .client import RequestResponseClient, RequestTimeout, ServiceError, raise_on_error
from .context import MessageContext
from .launcher import ConfigurationError, launch, run_processors
from .specs import ConsumerSpec, ProducerSpec, RequestResponseSpec

__all__ = [
    "ConfigurationError", "ConsumerSpec", "MessageContext", "Processor", "ProducerSpec", "RequestResponseClient",
    "RequestResponseSpec", "RequestTimeout", "ServiceError", "TypedProducer", "launch", "raise_on_error",
    "run_processors",
]
