import datetime

from google.protobuf import timestamp_pb2 as _timestamp_pb2
from google.protobuf.internal import containers as _containers
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from collections.abc import Iterable as _Iterable, Mapping as _Mapping
from typing import ClassVar as _ClassVar, Optional as _Optional, Union as _Union

DESCRIPTOR: _descriptor.FileDescriptor

class UploadBundleRequest(_message.Message):
    __slots__ = ("upload_id", "offset", "data", "total_size", "sha256")
    UPLOAD_ID_FIELD_NUMBER: _ClassVar[int]
    OFFSET_FIELD_NUMBER: _ClassVar[int]
    DATA_FIELD_NUMBER: _ClassVar[int]
    TOTAL_SIZE_FIELD_NUMBER: _ClassVar[int]
    SHA256_FIELD_NUMBER: _ClassVar[int]
    upload_id: str
    offset: int
    data: bytes
    total_size: int
    sha256: str
    def __init__(self, upload_id: _Optional[str] = ..., offset: _Optional[int] = ..., data: _Optional[bytes] = ..., total_size: _Optional[int] = ..., sha256: _Optional[str] = ...) -> None: ...

class UploadBundleResponse(_message.Message):
    __slots__ = ("version", "name", "size", "sha256")
    VERSION_FIELD_NUMBER: _ClassVar[int]
    NAME_FIELD_NUMBER: _ClassVar[int]
    SIZE_FIELD_NUMBER: _ClassVar[int]
    SHA256_FIELD_NUMBER: _ClassVar[int]
    version: str
    name: str
    size: int
    sha256: str
    def __init__(self, version: _Optional[str] = ..., name: _Optional[str] = ..., size: _Optional[int] = ..., sha256: _Optional[str] = ...) -> None: ...

class UploadStatusRequest(_message.Message):
    __slots__ = ("upload_id",)
    UPLOAD_ID_FIELD_NUMBER: _ClassVar[int]
    upload_id: str
    def __init__(self, upload_id: _Optional[str] = ...) -> None: ...

class UploadStatusResponse(_message.Message):
    __slots__ = ("received", "total_size")
    RECEIVED_FIELD_NUMBER: _ClassVar[int]
    TOTAL_SIZE_FIELD_NUMBER: _ClassVar[int]
    received: int
    total_size: int
    def __init__(self, received: _Optional[int] = ..., total_size: _Optional[int] = ...) -> None: ...

class ActivateRequest(_message.Message):
    __slots__ = ("version", "allow_downgrade")
    VERSION_FIELD_NUMBER: _ClassVar[int]
    ALLOW_DOWNGRADE_FIELD_NUMBER: _ClassVar[int]
    version: str
    allow_downgrade: bool
    def __init__(self, version: _Optional[str] = ..., allow_downgrade: _Optional[bool] = ...) -> None: ...

class ActivateResponse(_message.Message):
    __slots__ = ("active_version", "previous_version", "self_tests")
    ACTIVE_VERSION_FIELD_NUMBER: _ClassVar[int]
    PREVIOUS_VERSION_FIELD_NUMBER: _ClassVar[int]
    SELF_TESTS_FIELD_NUMBER: _ClassVar[int]
    active_version: str
    previous_version: str
    self_tests: _containers.RepeatedCompositeFieldContainer[SelfTestResult]
    def __init__(self, active_version: _Optional[str] = ..., previous_version: _Optional[str] = ..., self_tests: _Optional[_Iterable[_Union[SelfTestResult, _Mapping]]] = ...) -> None: ...

class SelfTestResult(_message.Message):
    __slots__ = ("image", "expected", "got", "passed")
    IMAGE_FIELD_NUMBER: _ClassVar[int]
    EXPECTED_FIELD_NUMBER: _ClassVar[int]
    GOT_FIELD_NUMBER: _ClassVar[int]
    PASSED_FIELD_NUMBER: _ClassVar[int]
    image: str
    expected: str
    got: str
    passed: bool
    def __init__(self, image: _Optional[str] = ..., expected: _Optional[str] = ..., got: _Optional[str] = ..., passed: _Optional[bool] = ...) -> None: ...

class RollbackRequest(_message.Message):
    __slots__ = ()
    def __init__(self) -> None: ...

class RollbackResponse(_message.Message):
    __slots__ = ("active_version", "previous_version", "self_tests")
    ACTIVE_VERSION_FIELD_NUMBER: _ClassVar[int]
    PREVIOUS_VERSION_FIELD_NUMBER: _ClassVar[int]
    SELF_TESTS_FIELD_NUMBER: _ClassVar[int]
    active_version: str
    previous_version: str
    self_tests: _containers.RepeatedCompositeFieldContainer[SelfTestResult]
    def __init__(self, active_version: _Optional[str] = ..., previous_version: _Optional[str] = ..., self_tests: _Optional[_Iterable[_Union[SelfTestResult, _Mapping]]] = ...) -> None: ...

class ListBundlesRequest(_message.Message):
    __slots__ = ()
    def __init__(self) -> None: ...

class ListBundlesResponse(_message.Message):
    __slots__ = ("bundles", "active_version")
    BUNDLES_FIELD_NUMBER: _ClassVar[int]
    ACTIVE_VERSION_FIELD_NUMBER: _ClassVar[int]
    bundles: _containers.RepeatedCompositeFieldContainer[BundleInfo]
    active_version: str
    def __init__(self, bundles: _Optional[_Iterable[_Union[BundleInfo, _Mapping]]] = ..., active_version: _Optional[str] = ...) -> None: ...

class BundleInfo(_message.Message):
    __slots__ = ("name", "version", "created", "size", "sha256", "active", "signer")
    NAME_FIELD_NUMBER: _ClassVar[int]
    VERSION_FIELD_NUMBER: _ClassVar[int]
    CREATED_FIELD_NUMBER: _ClassVar[int]
    SIZE_FIELD_NUMBER: _ClassVar[int]
    SHA256_FIELD_NUMBER: _ClassVar[int]
    ACTIVE_FIELD_NUMBER: _ClassVar[int]
    SIGNER_FIELD_NUMBER: _ClassVar[int]
    name: str
    version: str
    created: _timestamp_pb2.Timestamp
    size: int
    sha256: str
    active: bool
    signer: str
    def __init__(self, name: _Optional[str] = ..., version: _Optional[str] = ..., created: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., size: _Optional[int] = ..., sha256: _Optional[str] = ..., active: _Optional[bool] = ..., signer: _Optional[str] = ...) -> None: ...

class DeleteBundleRequest(_message.Message):
    __slots__ = ("version",)
    VERSION_FIELD_NUMBER: _ClassVar[int]
    version: str
    def __init__(self, version: _Optional[str] = ...) -> None: ...

class DeleteBundleResponse(_message.Message):
    __slots__ = ()
    def __init__(self) -> None: ...
