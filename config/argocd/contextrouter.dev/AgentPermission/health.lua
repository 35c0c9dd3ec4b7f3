-- Argo CD health of a contextrouter.dev AgentPermission.
-- Healthy: Ready=True for the current generation. A source it names that
-- does not exist keeps it Healthy (the permission applies to the sources
-- that exist; ResolvedRefs=False says which are missing, and the message
-- repeats it). Degraded: the spec is invalid, which stops every router it
-- applies to from taking a new bundle.
local hs = {}

local function condition(conditions, type)
  if conditions == nil then
    return nil
  end
  for _, c in ipairs(conditions) do
    if c.type == type then
      return c
    end
  end
  return nil
end

-- "Reason: message", the way kubectl shows a condition.
local function describe(c)
  local reason = c.reason or "Unknown"
  if c.message ~= nil and c.message ~= "" then
    return reason .. ": " .. c.message
  end
  return reason
end

local status = obj.status or {}
local ready = condition(status.conditions, "Ready")
local generation = obj.metadata.generation
if ready == nil then
  hs.status = "Progressing"
  hs.message = "Waiting for the operator to report the Ready condition"
  return hs
end
local observed = status.observedGeneration or 0
if ready.observedGeneration ~= nil and ready.observedGeneration < observed then
  observed = ready.observedGeneration
end
if generation ~= nil and observed < generation then
  hs.status = "Progressing"
  hs.message = "Waiting for the operator to observe generation " .. generation ..
    " (the status describes generation " .. observed .. ")"
  return hs
end

if ready.status == "True" then
  hs.status = "Healthy"
  hs.message = ready.message or ""
  local refs = condition(status.conditions, "ResolvedRefs")
  if refs ~= nil and refs.status == "False" then
    hs.message = hs.message .. "; " .. describe(refs)
  end
elseif ready.status == "False" and ready.reason == "InvalidSpec" then
  hs.status = "Degraded"
  hs.message = describe(ready)
else
  hs.status = "Progressing"
  hs.message = describe(ready)
end
return hs
