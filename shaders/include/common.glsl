// Shared by every kernel: workgroup size from specialization constants 0..2, flat invocation index.
#extension GL_EXT_control_flow_attributes : enable
layout(local_size_x_id = 0, local_size_y_id = 1, local_size_z_id = 2) in;

// A 1-D problem is dispatched as a 2-D grid of groups (x ≤ 65535 per axis): flatten it back.
uint flat_index() {
    return gl_GlobalInvocationID.x + gl_GlobalInvocationID.y * gl_NumWorkGroups.x * gl_WorkGroupSize.x;
}
